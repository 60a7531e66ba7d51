// A fixed pool of worker threads for data-parallel loops with low fork/join
// cost (a decode step of a ~170M model is ~7 ms and runs ~100 ops, so each
// parallel region must cost a few microseconds at most): workers spin briefly
// on an epoch counter before sleeping.
//
// Thread-compatible: one caller issues ParallelFor at a time.
#pragma once

#include <functional>

namespace specd::kernels {

class ThreadPool {
 public:
  // n_threads counts the calling thread: n_threads - 1 workers are started.
  // spin_us: how long an idle worker (and the caller waiting for workers)
  // spins before sleeping on a futex; < 0 takes SPECD_POOL_SPIN_US or 50 us.
  // Longer spins catch the next parallel region without a wake-up (tens of
  // microseconds in a VM) but burn a core that another rank may need.
  //
  // adaptive: the pool sheds a thread when its workers keep arriving late at
  // the join (a worker descheduled by another process: waiting for it costs
  // a scheduler time slice, far more than the work it would do), and tries
  // it again after a back-off that doubles while the stalls persist (see
  // Impl's Adaptation). Never more than n_threads; size() follows.
  explicit ThreadPool(int n_threads, double spin_us = -1, bool adaptive = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads a parallel region runs on now (n_threads unless adaptive).
  int size() const;
  // Adaptive pools: regrows a shed thread once its back-off has passed. Call
  // between parallel regions, e.g. once per model step (one clock read).
  void Poll();
  // Runs fn(thread_index, n_threads) on every thread (the caller is index 0)
  // and returns when all have finished.
  void Run(const std::function<void(int, int)>& fn);
  // Splits [0, n) into contiguous chunks, one per thread, and runs
  // fn(begin, end) on each; returns when all have finished.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // Splits [0, n) into about kChunksPerThread chunks per thread, each a
  // multiple of `align` long (except the last); thread q owns a contiguous
  // run of them and takes them in order, then takes the chunks left in the
  // others' runs; runs fn(begin, end) per chunk. A thread that starts late
  // (woken from sleep) or is preempted takes fewer chunks instead of holding
  // up the others, which a fixed split cannot do, while on a quiet machine
  // each thread streams one contiguous range as with a fixed split.
  // REQUIRES: align >= 1.
  static constexpr int kChunksPerThread = 4;
  void ParallelForDynamic(int64_t n, int64_t align,
                          const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace specd::kernels
