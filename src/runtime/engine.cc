#include "runtime/engine.h"

namespace specd {

Engine::~Engine() { (void)Shutdown(); }

int Engine::NewSequence() {
  const int id = runner_->kv().NewSequence();
  pending_.push_back(KvEdit::NewSequence(id));
  return id;
}

void Engine::FreeSequence(int seq) {
  if (!runner_->kv().IsLive(seq)) return;
  runner_->kv().FreeSequence(seq);
  pending_.push_back(KvEdit::FreeSequence(seq));
}

Status Engine::Apply(KvEdit edit) {
  RETURN_IF_ERROR(ApplyKvEdit(&runner_->kv(), edit));
  pending_.push_back(std::move(edit));
  return Status::Ok();
}

Status Engine::Forward(const std::vector<SeqInput>& batch, bool capture_aux,
                       ForwardOutput* out) {
  StepDesc desc;
  desc.capture_aux = capture_aux;
  desc.batch = batch;
  desc.kv_edits.swap(pending_);
  RETURN_IF_ERROR(PublishStep(runner_->comm(), desc));
  // Rank 0 already applied the KV edits when they were queued.
  desc.kv_edits.clear();
  return runner_->Execute(desc, out);
}

Status Engine::Heartbeat() {
  if (runner_->comm()->world_size() == 1 || shut_down_) return Status::Ok();
  StepDesc desc;
  desc.kv_edits.swap(pending_);
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
