#include "kernels/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/env.h"
#include "base/logging.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECD_CPU_RELAX() _mm_pause()
#else
#define SPECD_CPU_RELAX() ((void)0)
#endif

namespace specd::kernels {
namespace {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  // Returns at once when *word != expected (EAGAIN), so a wake that happened
  // between the caller's check and this call is never lost.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

// How long a thread spins before it sleeps. 50 us spans the gap between two
// matmuls of a decode step (norms, RoPE, attention of one layer), so workers
// rarely need a futex wake-up, which costs tens of microseconds in a VM
// (docs/performance.md, "Where a decode step goes"). Not longer, because
// ranks may outnumber cores: a spinning worker steals the core a peer rank
// needs.
int64_t DefaultSpinNanos() {
  static const int64_t ns = [] {
    if (const auto env = GetEnv(EnvVar::kPoolSpinUs)) {
      const char* s = env->c_str();
      char* end = nullptr;
      long v = std::strtol(s, &end, 10);
      if (end != s && *end == '\0' && v >= 0 && v <= 100000) return static_cast<int64_t>(v) * 1000;
      LogOnce(LogLevel::kWarn, "SPECD_POOL_SPIN_US", "thread pool",
              "SPECD_POOL_SPIN_US='" + *env +
                  "' is not an integer number of microseconds in 0..100000: ignored (using 50)");
    }
    return int64_t{50000};
  }();
  return ns;
}

// Spins until `word` differs from `seen` or the spin budget is spent; then
// sleeps on the futex, registering in `sleepers` so the waker knows to call
// into the kernel. Returns the new value (acquire).
uint32_t WaitForChange(std::atomic<uint32_t>& word, uint32_t seen, std::atomic<int>& sleepers,
                       int64_t budget) {
  uint32_t v = word.load(std::memory_order_acquire);
  if (v != seen) return v;
  if (budget > 0) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      SPECD_CPU_RELAX();
      v = word.load(std::memory_order_acquire);
      if (v != seen) return v;
      if ((i & 63) == 0 &&
          std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(budget)) {
        break;
      }
    }
  }
  for (;;) {
    // seq_cst pairs with the waker's seq_cst increment + sleepers load: either
    // the waker sees us registered, or the futex sees the changed word.
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    v = word.load(std::memory_order_seq_cst);
    if (v == seen) FutexWait(&word, seen);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    v = word.load(std::memory_order_acquire);
    if (v != seen) return v;
  }
}

void Publish(std::atomic<uint32_t>& word, std::atomic<int>& sleepers) {
  word.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(&word);
}

}  // namespace

// Invariants: `epoch` counts jobs published by the caller; a worker that has
// seen epoch e runs job e exactly once. `done` counts workers that finished
// the current job, reset by the caller before each publish (no worker touches
// it between jobs). `job`, `n_threads` and `retire_from` are written only
// while every worker is idle. Worker i (1-based) is workers[i - 1].
struct ThreadPool::Impl {
  int n_threads = 1;
  int max_threads = 1;
  int64_t spin_ns = 0;
  std::vector<std::thread> workers;
  std::atomic<uint32_t> epoch{0};
  std::atomic<int> epoch_sleepers{0};
  // Number of workers still running the current job; the last one bumps
  // `finished` so a sleeping caller wakes.
  std::atomic<int> pending{0};
  std::atomic<uint32_t> finished{0};
  std::atomic<int> finished_sleepers{0};
  const std::function<void(int, int)>* job = nullptr;
  // Workers with an index >= this leave after the current job (Resize).
  std::atomic<int> retire_from{INT_MAX};
  bool stop = false;  // written before the final publish

  // Adaptation (adaptive pools only). A region stalls when the caller, done
  // with its own share, waits for the workers longer than that share took
  // plus kStallNanos: with the dynamic split a worker on its core finishes
  // within one chunk of the caller, so waiting out a whole share means a
  // worker that was not running (on an idle 2-core VM 0.2% of the demo
  // model's regions stall, with one core busy elsewhere 30-60%;
  // docs/performance.md). After kStallsToShed stalls (1 in 8) within
  // kWindow regions one thread goes; it comes
  // back after `backoff_ns`, which doubles when the stalls return soon after
  // a regrow (the cause persists) and starts over otherwise.
  static constexpr int64_t kStallNanos = 20'000;
  static constexpr int kWindow = 256, kStallsToShed = 32;
  static constexpr int64_t kFirstBackoffNanos = 100'000'000, kMaxBackoffNanos = 8'000'000'000;
  bool adaptive = false;
  int window_regions = 0, window_stalls = 0;
  int64_t backoff_ns = kFirstBackoffNanos;
  int64_t grow_at_ns = 0, last_grow_ns = -1;

  void WorkerLoop(int index, uint32_t seen) {
    for (;;) {
      seen = WaitForChange(epoch, seen, epoch_sleepers, spin_ns);
      if (stop) return;
      // Read before `pending` drops: the caller resets it after the join.
      const bool retire = index >= retire_from.load(std::memory_order_relaxed);
      (*job)(index, n_threads);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        Publish(finished, finished_sleepers);
      }
      if (retire) return;
    }
  }

  void StartWorker(int index) {
    const uint32_t seen = epoch.load(std::memory_order_acquire);
    workers.emplace_back([this, index, seen] { WorkerLoop(index, seen); });
  }

  // Runs `fn` on every thread and waits for all. REQUIRES: n_threads > 1.
  void RunAll(const std::function<void(int, int)>& fn, int64_t* own_ns, int64_t* wait_ns) {
    job = &fn;
    pending.store(n_threads - 1, std::memory_order_relaxed);
    const uint32_t finished_before = finished.load(std::memory_order_relaxed);
    const int64_t t0 = adaptive ? NowNanos() : 0;
    Publish(epoch, epoch_sleepers);
    fn(0, n_threads);
    const int64_t t1 = adaptive ? NowNanos() : 0;
    WaitForChange(finished, finished_before, finished_sleepers, spin_ns);
    if (adaptive) {
      *own_ns = t1 - t0;
      *wait_ns = NowNanos() - t1;
    }
  }

  // Between jobs: m threads from now on. Shrinking joins the retired
  // workers (after one empty job that tells them to leave).
  void Resize(int m) {
    if (m < n_threads) {
      retire_from.store(m, std::memory_order_relaxed);
      const std::function<void(int, int)> leave = [](int, int) {};
      int64_t unused_own = 0, unused_wait = 0;
      RunAll(leave, &unused_own, &unused_wait);
      for (int i = m; i < n_threads; ++i) workers[i - 1].join();
      workers.resize(m - 1);
      retire_from.store(INT_MAX, std::memory_order_relaxed);
    } else {
      for (int i = n_threads; i < m; ++i) StartWorker(i);
    }
    n_threads = m;
    window_regions = window_stalls = 0;
  }

  void Observe(int64_t own_ns, int64_t wait_ns) {
    if (wait_ns > own_ns + kStallNanos) ++window_stalls;
    if (window_stalls >= kStallsToShed && n_threads > 1) {
      const int64_t now = NowNanos();
      const bool soon_after_grow = last_grow_ns >= 0 && now - last_grow_ns < 2 * backoff_ns;
      backoff_ns = soon_after_grow ? std::min(2 * backoff_ns, kMaxBackoffNanos) : kFirstBackoffNanos;
      grow_at_ns = now + backoff_ns;
      LogOnce(LogLevel::kInfo, "thread-pool-shed", "thread pool",
              "workers keep arriving late at the join (another process is using a core?): "
              "running on fewer threads and retrying more after a back-off (--threads N fixes "
              "the count)");
      Resize(n_threads - 1);
      return;
    }
    if (++window_regions >= kWindow) window_regions = window_stalls = 0;
  }
};

ThreadPool::ThreadPool(int n_threads, double spin_us, bool adaptive) : impl_(new Impl) {
  impl_->n_threads = n_threads < 1 ? 1 : n_threads;
  impl_->max_threads = impl_->n_threads;
  impl_->adaptive = adaptive;
  impl_->spin_ns = spin_us < 0 ? DefaultSpinNanos()
                               : static_cast<int64_t>(std::min(spin_us, 100000.0) * 1000);
  impl_->workers.reserve(impl_->n_threads - 1);
  for (int i = 1; i < impl_->n_threads; ++i) impl_->StartWorker(i);
}

ThreadPool::~ThreadPool() {
  impl_->stop = true;
  Publish(impl_->epoch, impl_->epoch_sleepers);
  for (auto& t : impl_->workers) t.join();
  delete impl_;
}

void ThreadPool::Poll() {
  Impl& p = *impl_;
  if (!p.adaptive || p.n_threads >= p.max_threads) return;
  const int64_t now = NowNanos();
  if (now < p.grow_at_ns) return;
  p.last_grow_ns = now;
  p.Resize(p.n_threads + 1);
}

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(0, 1);
    return;
  }
  int64_t own_ns = 0, wait_ns = 0;
  p.RunAll(fn, &own_ns, &wait_ns);
  if (p.adaptive) p.Observe(own_ns, wait_ns);
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int threads = size();
  if (threads == 1 || n == 1) {
    fn(0, n);
    return;
  }
  Run([&](int index, int count) {
    // Balanced contiguous chunks: the first n % count chunks get one extra.
    int64_t base = n / count, extra = n % count;
    int64_t begin = index * base + (index < extra ? index : extra);
    int64_t end = begin + base + (index < extra ? 1 : 0);
    if (begin < end) fn(begin, end);
  });
}

void ThreadPool::ParallelForDynamic(int64_t n, int64_t align,
                                    const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (align < 1) align = 1;
  const int threads = size();
  const int64_t units = (n + align - 1) / align;
  if (threads == 1 || units == 1) {
    fn(0, n);
    return;
  }
  const int64_t n_chunks = std::min<int64_t>(units, int64_t{threads} * kChunksPerThread);
  // Thread q owns chunks [q * n_chunks / threads, (q + 1) * n_chunks / threads)
  // and takes them in order, so on a quiet machine each thread streams one
  // contiguous range (as a static split does: the prefetchers see one stream);
  // a thread that runs out takes the next chunks of the others' ranges.
  // Chunk c covers units [c * units / n_chunks, (c + 1) * units / n_chunks).
  struct alignas(64) Cursor {
    std::atomic<int64_t> next{0};
  };
  constexpr int kStackCursors = 16;
  Cursor stack_cursors[kStackCursors];
  std::unique_ptr<Cursor[]> heap_cursors;
  Cursor* cursors = stack_cursors;
  if (threads > kStackCursors) {
    heap_cursors = std::make_unique<Cursor[]>(static_cast<size_t>(threads));
    cursors = heap_cursors.get();
  }
  for (int q = 0; q < threads; ++q) {
    cursors[q].next.store(q * n_chunks / threads, std::memory_order_relaxed);
  }
  Run([&](int tid, int) {
    for (int k = 0; k < threads; ++k) {
      const int q = (tid + k) % threads;
      const int64_t q_end = (q + 1) * n_chunks / threads;
      for (;;) {
        const int64_t c = cursors[q].next.fetch_add(1, std::memory_order_relaxed);
        if (c >= q_end) break;
        const int64_t begin = c * units / n_chunks * align;
        const int64_t end = std::min(n, (c + 1) * units / n_chunks * align);
        if (begin < end) fn(begin, end);
      }
    }
  });
}

}  // namespace specd::kernels
