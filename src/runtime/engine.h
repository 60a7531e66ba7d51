// Rank 0's view of the engine: it owns the decisions (sequences, batches,
// sampling) and drives every rank through step descriptors.
//
// KV-cache edits (model/kv_edit.h) are applied to rank 0's cache at once and
// queued; the next Forward ships them to the other ranks ahead of its batch,
// where ModelRunner::Execute applies them with the same function, so all
// caches see the same edits in the same order.
// Not thread-safe: one engine loop thread calls it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/model_runner.h"
#include "spec/draft_cost.h"

namespace specd {

class Engine {
 public:
  // REQUIRES: runner->comm()->rank() == 0. Does not own runner.
  explicit Engine(ModelRunner* runner) : runner_(runner) {}
  ~Engine();

  ModelRunner& runner() { return *runner_; }
  const ModelConfig& config() const { return runner_->config(); }
  KvCache& kv() { return runner_->kv(); }

  int NewSequence();
  void FreeSequence(int seq);
  // Applies `edit` here and queues it for the other ranks; an edit that does
  // not fit rank 0's cache is refused here (and never shipped).
  Status Apply(KvEdit edit);

  // One step on every rank: publishes queued KV ops + batch, runs locally.
  Status Forward(const std::vector<SeqInput>& batch, bool capture_aux, ForwardOutput* out);
  // Ships queued KV ops with an empty batch. An idle server calls it now and
  // then so the other ranks' wait for the next step never reaches the
  // communicator's deadline, and so a dead rank is noticed while idle.
  // A no-op at world size 1.
  Status Heartbeat();
  // Tells the other ranks to leave their worker loops (idempotent).
  Status Shutdown();

  // What a step costs on this machine (runtime/step_costs.h), measured once
  // per engine for the draft-shape choice; null until set. step_costs()
  // follows the forward times observed since (StepCosts::Observe).
  const StepCosts* step_costs() const { return has_step_costs_ ? &step_costs_ : nullptr; }
  StepCosts* mutable_step_costs() { return has_step_costs_ ? &step_costs_ : nullptr; }
  void set_step_costs(StepCosts costs) {
    step_costs_ = std::move(costs);
    has_step_costs_ = true;
  }

 private:
  ModelRunner* runner_;
  std::vector<KvEdit> pending_;
  bool shut_down_ = false;
  StepCosts step_costs_;
  bool has_step_costs_ = false;
};

// A sequence that is freed (its KV pages returned) when the guard goes out of
// scope, on every path out of a single-sequence job.
class ScopedSequence {
 public:
  explicit ScopedSequence(Engine& engine) : engine_(engine), seq_(engine.NewSequence()) {}
  ~ScopedSequence() { engine_.FreeSequence(seq_); }
  ScopedSequence(const ScopedSequence&) = delete;
  ScopedSequence& operator=(const ScopedSequence&) = delete;
  int id() const { return seq_; }

 private:
  Engine& engine_;
  int seq_;
};

}  // namespace specd
