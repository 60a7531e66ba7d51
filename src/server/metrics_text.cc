#include "server/metrics_text.h"

#include <fmt/format.h>

namespace specd::server {

void RequestCounter::Add(int status) {
  MutexLock lock(&mu_);
  by_status_[status]++;
}

std::map<int, int64_t> RequestCounter::Get() const {
  MutexLock lock(&mu_);
  return by_status_;
}

namespace {

void Header(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void Scalar(std::string* out, const char* name, const char* type, const char* help, T value) {
  Header(out, name, type, help);
  *out += fmt::format("{} {}\n", name, value);
}

void Hist(std::string* out, const char* name, const char* help, const Histogram& h) {
  Header(out, name, "histogram", help);
  const Histogram::Snapshot s = h.Get();
  for (size_t i = 0; i < s.upper_bounds.size(); ++i)
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, s.upper_bounds[i], s.cumulative[i]);
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, s.count);
  *out += fmt::format("{}_sum {}\n{}_count {}\n", name, s.sum, name, s.count);
}

}  // namespace

std::string RenderMetrics(const RequestCounter& requests, const SchedulerMetrics* m, bool ready) {
  std::string out;
  Header(&out, "specd_requests_total", "counter", "HTTP requests answered, by status code.");
  for (const auto& [status, n] : requests.Get())
    out += fmt::format("specd_requests_total{{status=\"{}\"}} {}\n", status, n);
  Scalar(&out, "specd_ready", "gauge", "1 once the model is loaded and every rank is ready.",
         ready ? 1 : 0);
  if (m == nullptr) return out;
  Scalar(&out, "specd_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.",
         m->prompt_tokens.load());
  Scalar(&out, "specd_generation_tokens_total", "counter", "Tokens generated.",
         m->generation_tokens.load());
  Header(&out, "specd_request_finished_total", "counter", "Finished requests by finish reason.");
  out += fmt::format("specd_request_finished_total{{reason=\"stop\"}} {}\n", m->finished_stop.load());
  out += fmt::format("specd_request_finished_total{{reason=\"length\"}} {}\n",
                     m->finished_length.load());
  out += fmt::format("specd_request_finished_total{{reason=\"cancelled\"}} {}\n",
                     m->finished_cancelled.load());
  out += fmt::format("specd_request_finished_total{{reason=\"error\"}} {}\n", m->finished_error.load());
  Hist(&out, "specd_time_to_first_token_seconds", "Seconds from request arrival to its first token.",
       m->ttft);
  Hist(&out, "specd_inter_token_latency_seconds",
       "Seconds between consecutive tokens of a request (a step that emits k tokens counts k "
       "intervals of 1/k).",
       m->itl);
  Scalar(&out, "specd_queue_depth", "gauge", "Requests waiting for admission.",
         m->queue_depth.load());
  Scalar(&out, "specd_running_sequences", "gauge", "Sequences being prefilled or decoded.",
         m->running.load());
  const int total = m->kv_total_pages.load();
  Scalar(&out, "specd_kv_cache_usage_ratio", "gauge", "Fraction of KV cache pages in use (rank 0).",
         total > 0 ? static_cast<double>(m->kv_used_pages.load()) / total : 0.0);
  Scalar(&out, "specd_kv_cache_used_pages", "gauge", "KV cache pages in use (rank 0).",
         m->kv_used_pages.load());
  Scalar(&out, "specd_preemptions_total", "counter",
         "Sequences preempted (KV dropped, re-prefilled later) because the KV cache was full.",
         m->preemptions.load());
  Scalar(&out, "specd_engine_steps_total", "counter", "Batched forward passes run.",
         m->steps.load());
  Hist(&out, "specd_spec_accept_length", "Tokens committed per speculative verify step.",
       m->accept_length);
  const Histogram::Snapshot a = m->accept_length.Get();
  Scalar(&out, "specd_spec_accept_length_mean", "gauge",
         "Mean tokens committed per speculative verify step.",
         a.count > 0 ? a.sum / static_cast<double>(a.count) : 0.0);
  Hist(&out, "specd_spec_draft_depth",
       "Draft depth the cost model chose per sequence and step (0: a plain step).",
       m->draft_depth);
  Scalar(&out, "specd_spec_predicted_speedup", "gauge",
         "The cost model's predicted speedup over plain decoding for the last step.",
         m->predicted_speedup.load());
  Scalar(&out, "specd_spec_predicted_speedup_avg", "gauge",
         "The cost model's predicted speedup over plain decoding, averaged over about the last "
         "32 decode steps.",
         m->predicted_speedup_avg.load());
  Scalar(&out, "specd_spec_measured_speedup_avg", "gauge",
         "Tokens per second measured over about the last 32 decode steps (drafting, forward and "
         "verification) against the plain rate the cost model predicts for the same batch.",
         m->measured_speedup_avg.load());
  Scalar(&out, "specd_allreduce_seconds_total", "counter",
         "Seconds rank 0 spent inside collectives (Communicator::comm_seconds).",
         m->comm_seconds.load());
  return out;
}

}  // namespace specd::server
