// /metrics in the Prometheus text exposition format (version 0.0.4).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/thread_annotations.h"
#include "runtime/scheduler_metrics.h"

namespace specd::server {

// HTTP responses by status code. Thread-safe.
class RequestCounter {
 public:
  void Add(int status) EXCLUDES(mu_);
  std::map<int, int64_t> Get() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<int, int64_t> by_status_ GUARDED_BY(mu_);
};

// Renders every specd_* metric. `sched` may be null (model still loading):
// then only the request counter and readiness are written.
std::string RenderMetrics(const RequestCounter& requests, const SchedulerMetrics* sched,
                          bool ready);

}  // namespace specd::server
