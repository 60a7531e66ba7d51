#include "runtime/engine.h"

namespace specd {

Engine::~Engine() { (void)Shutdown(); }

int Engine::NewSequence() {
  int id = runner_->kv().NewSequence();
  pending_.push_back({KvOp::kNew, id, id, 0});
  return id;
}

void Engine::FreeSequence(int seq) {
  if (!runner_->kv().IsLive(seq)) return;
  runner_->kv().FreeSequence(seq);
  pending_.push_back({KvOp::kFree, seq, 0, 0});
}

void Engine::Truncate(int seq, int length) {
  runner_->kv().Truncate(seq, length);
  pending_.push_back({KvOp::kTruncate, seq, length, 0});
}

void Engine::MoveSlot(int seq, int src, int dst) {
  runner_->kv().MoveSlot(seq, src, dst);
  pending_.push_back({KvOp::kMove, seq, src, dst});
}

Status Engine::Forward(const std::vector<SeqInput>& batch, bool capture_aux,
                       ForwardOutput* out) {
  StepDesc desc;
  desc.capture_aux = capture_aux;
  desc.batch = batch;
  desc.kv_ops.swap(pending_);
  RETURN_IF_ERROR(PublishStep(runner_->comm(), desc));
  // Rank 0 already applied the KV ops when they were queued.
  desc.kv_ops.clear();
  return runner_->Execute(desc, out);
}

Status Engine::Heartbeat() {
  if (runner_->comm()->world_size() == 1 || shut_down_) return Status::Ok();
  StepDesc desc;
  desc.kv_ops.swap(pending_);
  return PublishStep(runner_->comm(), desc).WithStage("heartbeat");
}

Status Engine::Shutdown() {
  if (shut_down_) return Status::Ok();
  shut_down_ = true;
  StepDesc desc;
  desc.shutdown = true;
  return PublishStep(runner_->comm(), desc);
}

}  // namespace specd
