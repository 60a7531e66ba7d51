// OpenAI response bodies, stream chunks, server-sent events and error objects,
// shaped as api.openai.com sends them (field names, `object` values, null
// where OpenAI sends null), so unmodified clients parse them.
//
//   completions: {"id": "cmpl-…", "object": "text_completion", "created",
//                 "model", "choices": [{"index", "text", "logprobs",
//                 "finish_reason"}], "usage"}
//   chat:        {"id": "chatcmpl-…", "object": "chat.completion", …,
//                 "choices": [{"index", "message": {"role", "content"},
//                 "logprobs", "finish_reason"}], "usage"}
//   chunks:      "text_completion" / "chat.completion.chunk" with
//                 finish_reason null until the last; chat deltas carry the
//                 role first; with include_usage a final chunk has
//                 "choices": [] and the usage (others "usage": null).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/scheduler_request.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace specd::server {

using OJson = nlohmann::ordered_json;

// "cmpl-" / "chatcmpl-" followed by 24 random hex digits.
std::string NewRequestId(Endpoint endpoint);

// {"error": {"message", "type", "param", "code"}}
OJson ErrorJson(const ApiError& e);
OJson UsageJson(int prompt_tokens, int completion_tokens);
OJson ModelsJson(const std::string& model, int64_t created, int64_t max_model_len);

// Serializes as one line; invalid UTF-8 (partial characters in token
// strings) becomes U+FFFD instead of throwing.
std::string Dump(const OJson& j);
// "data: <json>\n\n"
std::string SseData(const OJson& j);
inline const char* SseDone() { return "data: [DONE]\n\n"; }

// Turns a request's output into response JSON. Keeps the state streaming
// needs across chunks (chat's role delta, completions' text_offset).
class ResponseBuilder {
 public:
  // tokenizer may be null (token strings then read "<id>").
  ResponseBuilder(Endpoint endpoint, std::string id, std::string model, int64_t created,
                  int logprobs, const Tokenizer* tokenizer);

  const std::string& id() const { return id_; }

  // One stream chunk for `d` (text, logprobs, finish_reason when finished).
  // Chat: the first chunk also carries {"role": "assistant"}.
  OJson Chunk(const OutputDelta& d);
  // The final usage-only chunk (stream_options.include_usage).
  OJson UsageChunk(int prompt_tokens, int completion_tokens) const;
  // The complete non-streamed response for the merged output `all`.
  OJson Full(const OutputDelta& all);

 private:
  OJson Base(bool chunk) const;
  // null when logprobs are off.
  OJson Logprobs(const std::vector<TokenLogprob>& lps);
  std::string TokenString(int32_t id) const;

  Endpoint endpoint_;
  std::string id_, model_;
  int64_t created_;
  int logprobs_;
  const Tokenizer* tokenizer_;
  bool sent_role_ = false;
  int64_t text_offset_ = 0;
};

}  // namespace specd::server
