#include "runtime/scheduler_request.h"

#include <chrono>

namespace specd {

double SequenceStats::accept_length_mean() const {
  double steps = 0, tokens = 0;
  for (size_t i = 0; i < accept_hist.size(); ++i) {
    steps += accept_hist[i];
    tokens += static_cast<double>(accept_hist[i]) * (i + 1);
  }
  return steps > 0 ? tokens / steps : 0;
}

double SequenceStats::predicted_speedup_mean() const {
  int steps = 0;
  for (int n : depth_hist) steps += n;
  return steps > 0 ? predicted_speedup_sum / steps : 0;
}

bool RequestStream::Next(OutputDelta* out, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  MutexLock lock(&mu_);
  if (done_) return false;
  // Written out instead of a predicate lambda, which the thread-safety
  // analysis would check as a function that does not hold mu_.
  while (!has_pending_) {
    if (timeout_s <= 0) return false;  // a poll: no wait, no system call
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
      pending_.stats = d.stats;
      pending_.finish_reason = d.finish_reason;
      pending_.error = d.error;
    }
    has_pending_ = true;
  }
  cv_.notify_all();
}

}  // namespace specd
