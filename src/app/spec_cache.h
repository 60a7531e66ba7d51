// What auto-shaped speculation learns about a model, kept in ~/.cache/specd
// (or $XDG_CACHE_HOME/specd) so a restart need not learn it again: the step
// costs (per model, binary, machine and engine settings) and the drafter's
// acceptance (per target, drafter and workload).
#pragma once

#include <optional>
#include <string>

#include "runtime/engine.h"
#include "runtime/model_runner.h"
#include "spec/draft_cost.h"
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

// The acceptance remembered between auto-shaped runs of one target (its
// files and --quantize), drafter (EAGLE-3 head files, or n-gram) and
// workload ("greedy" and "sampled" generate runs, whose acceptance differs,
// and "serve", whose requests mix both): not the machine, binary or thread
// count, which change what a draft costs, not whether it is accepted.
// Inactive (Load gives nothing, Save writes nothing) unless `spec` is
// auto-shaped EAGLE3 or NGRAM and `enabled` (--no-acceptance-cache turns it
// off).
class AcceptanceMemory {
 public:
  AcceptanceMemory(const SpecOptions& spec, const RunnerOptions& runner,
                   const std::string& draft_model, const std::string& workload, bool enabled);
  // The remembered acceptance with max_depth depths (logged), if any.
  std::optional<AcceptanceModel> Load(int max_depth) const;
  void Save(const AcceptanceModel& pooled) const;

 private:
  std::string key_;  // empty: inactive
};

}  // namespace specd::app
