// Step costs for auto-shaped speculation, cached per model, binary, machine
// and engine settings in ~/.cache/specd (or $XDG_CACHE_HOME/specd), so a
// restart does not measure again.
#pragma once

#include <string>

#include "runtime/engine.h"
#include "runtime/model_runner.h"
#include "spec/eagle3_head.h"
#include "spec/spec_options.h"

namespace specd::app {

// Sets engine's step costs when `spec` is auto-shaped; otherwise a no-op.
// `draft_model` is the head's folder ("" for n-gram). max_batch: sequences
// one step may verify together (1 for generate); forwards are measured up to
// the tokens of that many deepest chains (at most 64; beyond, the cost model
// extrapolates).
Status PrepareStepCosts(Engine& engine, Eagle3Head* head, const SpecOptions& spec,
                        const RunnerOptions& runner, int tp, const std::string& draft_model,
                        int max_batch = 1);

}  // namespace specd::app
