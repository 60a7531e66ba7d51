// Single-sequence generation on rank 0: prefill, then decode (plain or
// speculative), with stop conditions and statistics.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "sampling/sampler.h"

namespace specd {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
};

struct GenerateStats {
  int n_prompt = 0;
  int n_generated = 0;
  double prefill_s = 0;
  double decode_s = 0;        // from the first generated token to the last
  int target_forwards = 0;    // decode-phase forward passes of the target
  size_t weight_bytes = 0;    // weight bytes one target forward reads (this rank)
  double comm_s = 0;          // time inside collectives during decode
  // Speculative decoding only.
  double draft_s = 0, verify_s = 0;
  std::vector<int> accept_hist;  // accept_hist[i]: steps that committed i+1 tokens

  double prefill_tok_s() const { return prefill_s > 0 ? n_prompt / prefill_s : 0; }
  // Tokens after the first (which comes from prefill) per decode second.
  double decode_tok_s() const {
    return decode_s > 0 && n_generated > 1 ? (n_generated - 1) / decode_s : 0;
  }
  double decode_gb_s() const {
    return decode_s > 0 ? static_cast<double>(weight_bytes) * target_forwards / decode_s / 1e9 : 0;
  }
  double accept_length_mean() const;
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;  // "stop" | "length" | "cancelled"
  GenerateStats stats;
};

// Called with each new token as soon as it is decided; return false to stop.
using TokenCallback = std::function<bool(int32_t)>;

// Validates the request against the model: empty prompt, token ids out of
// range, prompt + max_tokens over the context length, bad sampling values.
Status ValidateRequest(const ModelConfig& config, const GenerateRequest& req);

Status GeneratePlain(Engine& engine, const GenerateRequest& req, const TokenCallback& on_token,
                     GenerateResult* result);

}  // namespace specd
