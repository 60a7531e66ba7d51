#include "runtime/scheduler_request.h"

#include <chrono>

namespace specd {

bool RequestStream::Next(OutputDelta* out, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_) return false;
  if (!has_pending_) {
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return has_pending_; });
    if (!has_pending_) return false;
  }
  *out = std::move(pending_);
  pending_ = OutputDelta();
  has_pending_ = false;
  if (out->finished) done_ = true;
  return true;
}

void RequestStream::Push(const OutputDelta& d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.finished) return;  // nothing follows the end
    pending_.text += d.text;
    pending_.token_ids.insert(pending_.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    pending_.logprobs.insert(pending_.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    pending_.prompt_tokens = d.prompt_tokens;
    pending_.completion_tokens = d.completion_tokens;
    if (d.finished) {
      pending_.finished = true;
      pending_.finish_reason = d.finish_reason;
      pending_.error = d.error;
    }
    has_pending_ = true;
  }
  cv_.notify_all();
}

}  // namespace specd
