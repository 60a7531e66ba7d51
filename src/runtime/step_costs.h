// Measures what the draft-shape choice (spec/draft_cost.h) needs to know
// about this machine: the target's forward time over n = 1..max_tokens new
// tokens (logits for every token, as a verify pass) and the draft head's
// one-token step. Runs on rank 0 through Engine::Forward, so every rank takes
// part and tensor-parallel communication is included.
#pragma once

#include <string>

#include "runtime/engine.h"
#include "spec/draft_cost.h"
#include "spec/eagle3_head.h"
#include "spec/spec_options.h"

namespace specd {

// head may be null (n-gram: drafting costs no forward). Takes the fastest of
// `reps` timed runs per size after one warm-up run (the median of more, up
// to 50, where a size takes under 1 ms), after a context of
// `context` tokens; sizes between the measured ones are interpolated.
// The context MeasureStepCosts measures after by default.
constexpr int kStepCostContext = 32;
StatusOr<StepCosts> MeasureStepCosts(Engine& engine, Eagle3Head* head, int max_tokens = 16,
                                     int reps = 3, int context = kStepCostContext);

// How many new tokens the costs are measured for: the deepest auto-shaped
// chain (max_auto_depth + 1 tokens) for each of up to `max_batch` sequences,
// at most 64 and at least one chain.
int StepCostTokens(const SpecOptions& spec, int max_batch);

// MeasureStepCosts, remembered in `cache_dir` (created if missing) under a
// file named by a hash of `key`, which must name everything the costs depend
// on (model files, binary, machine, threads, world size, draft head). A
// missing or unreadable entry is measured and written; failing to write it
// is logged, not an error.
StatusOr<StepCosts> CachedStepCosts(Engine& engine, Eagle3Head* head, int max_tokens,
                                    const std::string& key, const std::string& cache_dir);

}  // namespace specd
