#include "runtime/scheduler_request.h"

#include <chrono>

namespace specd {

bool RequestStream::Next(OutputDelta* out, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  MutexLock lock(&mu_);
  if (done_) return false;
  // Written out instead of a predicate lambda, which the thread-safety
  // analysis would check as a function that does not hold mu_.
  while (!has_pending_) {
    if (cv_.wait_until(mu_, deadline) == std::cv_status::timeout && !has_pending_) return false;
  }
  *out = std::move(pending_);
  pending_ = OutputDelta();
  has_pending_ = false;
  if (out->finished) done_ = true;
  return true;
}

void RequestStream::Push(const OutputDelta& d) {
  {
    MutexLock lock(&mu_);
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
