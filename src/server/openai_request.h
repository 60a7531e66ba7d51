// Parsing and validation of OpenAI request bodies (/v1/completions and
// /v1/chat/completions), as a pure function of the body bytes: no model, no
// tokenizer, no HTTP, so it can be fuzzed directly.
//
// Every rejection is an ApiError with the HTTP status, a message that names
// the field and what was expected versus found, and `param` = the field, as
// OpenAI's error object carries it. Unknown fields are ignored (as OpenAI
// and vLLM do) unless they ask for something specd cannot do (n > 1, tools,
// response_format other than text, echo, logit_bias, penalties, suffix,
// best_of > 1): those are refused rather than silently dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampler.h"

namespace specd::server {

enum class Endpoint { kCompletions, kChat };

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" → null
  std::string code;   // "" → null
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // "" when absent

  // /v1/completions: exactly one of the two.
  bool prompt_is_ids = false;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;

  // /v1/chat/completions: [{"role", "content": string, ...}], content parts
  // of type "text" joined into one string; other keys kept for the template.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();

  std::optional<int> max_tokens;  // max_tokens or max_completion_tokens
  SamplingParams sampling;        // temperature defaults to 1 as in OpenAI's API
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  // Completions: logprobs = k (0..20). Chat: logprobs: true → top_logprobs
  // (0..20, default 0). -1: off.
  int logprobs = -1;
  bool ignore_eos = false;        // vLLM's extension
};

// Largest `logprobs` / `top_logprobs` accepted.
inline constexpr int kMaxTopLogprobs = 20;
// JSON nesting deeper than this is refused before parsing.
inline constexpr int kMaxJsonDepth = 64;

// Parses `body`. On success fills *out and returns true; otherwise fills *err
// (never a 5xx) and returns false. Never throws.
bool ParseApiRequest(std::string_view body, Endpoint endpoint, ApiRequest* out, ApiError* err);

}  // namespace specd::server
