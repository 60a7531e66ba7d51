// Threads for request handlers that block (tokenizing, waiting for the
// engine), so the HTTP event loop never does. Threads start on demand, up to
// max_threads; tasks beyond that wait in order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "base/thread_annotations.h"

namespace specd::server {

class WorkerPool {
 public:
  explicit WorkerPool(int max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  ~WorkerPool() { Join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Any thread. Ignored after Join().
  void Submit(std::function<void()> task) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (stop_) return;
    tasks_.push_back(std::move(task));
    if (static_cast<int>(tasks_.size()) > idle_ &&
        static_cast<int>(threads_.size()) < max_threads_)
      threads_.emplace_back([this] { Run(); });
    else
      cv_.notify_one();
  }
  // Runs the queued tasks to the end, then joins every thread. Idempotent.
  void Join() EXCLUDES(mu_) {
    std::vector<std::thread> threads;
    {
      MutexLock l(&mu_);
      stop_ = true;
      threads.swap(threads_);
      cv_.notify_all();
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  void Run() EXCLUDES(mu_) {
    for (;;) {
      std::function<void()> task;
      {
        MutexLock l(&mu_);
        ++idle_;
        while (tasks_.empty() && !stop_) cv_.wait(mu_);
        --idle_;
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  const int max_threads_;
  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  int idle_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
};

}  // namespace specd::server
