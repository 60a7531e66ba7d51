#include "runtime/scheduler_metrics.h"

#include <algorithm>

namespace specd {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  const size_t b = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  MutexLock lock(&mu_);
  counts_[b]++;
  count_++;
  sum_ += v;
}

Histogram::Snapshot Histogram::Get() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  MutexLock lock(&mu_);
  uint64_t acc = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    acc += counts_[i];
    s.cumulative.push_back(acc);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

SchedulerMetrics::SchedulerMetrics()
    : ttft({0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
            20.0, 40.0, 80.0}),
      itl({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
           1.0, 2.5}),
      accept_length({1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32}),
      draft_depth({0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16}) {}

}  // namespace specd
