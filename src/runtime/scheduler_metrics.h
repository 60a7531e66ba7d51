// Counters and histograms the engine loop updates and /metrics reads.
// Thread-safe: counters are atomics, histograms take a short lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "base/thread_annotations.h"

namespace specd {

// A Prometheus-style histogram: cumulative counts per upper bound.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v) EXCLUDES(mu_);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // (upper_bounds.size()): observations <= bound
    uint64_t count = 0;                // all observations (the +Inf bucket)
    double sum = 0;
  };
  Snapshot Get() const EXCLUDES(mu_);

 private:
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<uint64_t> counts_ GUARDED_BY(mu_);  // per bucket, not cumulative
  uint64_t count_ GUARDED_BY(mu_) = 0;
  double sum_ GUARDED_BY(mu_) = 0;
};

struct SchedulerMetrics {
  SchedulerMetrics();

  std::atomic<int64_t> prompt_tokens{0};      // prompt tokens of admitted requests
  std::atomic<int64_t> generation_tokens{0};  // tokens generated
  std::atomic<int64_t> finished_stop{0}, finished_length{0}, finished_cancelled{0},
      finished_error{0};
  std::atomic<int64_t> preemptions{0};
  std::atomic<int64_t> steps{0};
  std::atomic<int> queue_depth{0};  // waiting, not yet admitted
  std::atomic<int> running{0};      // admitted, holding a KV sequence
  std::atomic<int> kv_used_pages{0};
  std::atomic<int> kv_total_pages{0};
  std::atomic<double> comm_seconds{0};  // Communicator::comm_seconds() of rank 0

  // Seconds from submission to the first token.
  Histogram ttft;
  // Seconds between consecutive tokens of one request; when one step emits k
  // tokens (speculation), each gets 1/k of the interval.
  Histogram itl;
  // Tokens committed per verify step of one sequence (speculation only).
  Histogram accept_length;
  // Auto-shaped speculation: the draft depth chosen per sequence and step
  // (0: a plain step), and the cost model's predicted speedup over plain
  // decoding for the last step.
  Histogram draft_depth;
  std::atomic<double> predicted_speedup{0};
  // Over roughly the last 32 decode steps with auto-shaped speculation: the
  // tokens per second measured (the whole step: drafting, forward,
  // verification) against the plain rate the cost model predicts for the
  // same sequences, t(n) for n sequences; and the predicted speedup.
  std::atomic<double> measured_speedup_avg{0}, predicted_speedup_avg{0};
};

}  // namespace specd
