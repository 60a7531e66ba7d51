// One request run to completion on the caller's thread (generate, bench and
// tests): the same Scheduler and Sequence code that serve runs, with a batch
// of one and the whole prompt in one prefill step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/scheduler_request.h"
#include "sampling/sampler.h"
#include "spec/draft_cost.h"
#include "spec/eagle3_head.h"
#include "spec/spec_options.h"

namespace specd {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
};

using GenerateStats = SequenceStats;

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;  // "stop" | "length" | "cancelled" | "error"
  GenerateStats stats;
};

// Called with each new token as soon as it is decided; return false to stop.
using TokenCallback = std::function<bool(int32_t)>;

// Runs `req` with plain decoding (spec.algorithm == kNone) or speculative
// decoding (head required for EAGLE3, with the runner capturing
// head->aux_layers()). InvalidArgument / OutOfRange: the request does not fit
// the model (the message names the field); an engine error is returned as is
// (result holds what was generated before it). pooled (may be null): in, the
// acceptance to start from (observations() == 0: none); out, the pooled
// acceptance after this run (Scheduler::pooled_acceptance).
Status Generate(Engine& engine, const GenerateRequest& req, const TokenCallback& on_token,
                GenerateResult* result, const SpecOptions& spec = {},
                Eagle3Head* head = nullptr, AcceptanceModel* pooled = nullptr);

}  // namespace specd
