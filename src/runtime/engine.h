// Rank 0's view of the engine: it owns the decisions (sequences, batches,
// sampling) and drives every rank through step descriptors.
//
// KV-cache mutations (new/free/truncate/move) are applied to rank 0's cache at
// once and queued; the next Forward ships them to the other ranks ahead of its
// batch, so all caches see the same operations in the same order.
// Not thread-safe: one engine loop thread calls it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/model_runner.h"

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
  void Truncate(int seq, int length);
  void MoveSlot(int seq, int src, int dst);

  // One step on every rank: publishes queued KV ops + batch, runs locally.
  Status Forward(const std::vector<SeqInput>& batch, bool capture_aux, ForwardOutput* out);
  // Ships queued KV ops with an empty batch. An idle server calls it now and
  // then so the other ranks' wait for the next step never reaches the
  // communicator's deadline, and so a dead rank is noticed while idle.
  // A no-op at world size 1.
  Status Heartbeat();
  // Tells the other ranks to leave their worker loops (idempotent).
  Status Shutdown();

 private:
  ModelRunner* runner_;
  std::vector<KvOp> pending_;
  bool shut_down_ = false;
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
