#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace specd::kernels {
namespace {

TEST(ThreadPoolTest, RunCallsEveryIndexOnce) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    ASSERT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> calls(n);
    std::atomic<int> bad_count{0};
    pool.Run([&](int index, int count) {
      if (count != n) bad_count.fetch_add(1);
      calls[index].fetch_add(1);
    });
    EXPECT_EQ(bad_count.load(), 0);
    for (int i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << "thread " << i;
  }
}

TEST(ThreadPoolTest, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 4, 7, 100, 1001}) {
    std::vector<int> hits(n, 0);  // each index written by exactly one thread
    pool.ParallelFor(n, [&](int64_t b, int64_t e) {
      ASSERT_LT(b, e);
      for (int64_t i = b; i < e; ++i) hits[i] += 1;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, ParallelForDynamicCoversRangeOnceInAlignedChunks) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t align : {1, 4, 7}) {
      for (int64_t n : {0, 1, 3, 4, 5, 17, 64, 100, 1001, 8192}) {
        std::vector<int> hits(n, 0);
        std::atomic<int> misaligned{0};
        pool.ParallelForDynamic(n, align, [&](int64_t b, int64_t e) {
          ASSERT_LT(b, e);
          if (b % align != 0 || (e != n && e % align != 0)) misaligned.fetch_add(1);
          for (int64_t i = b; i < e; ++i) hits[i] += 1;
        });
        EXPECT_EQ(misaligned.load(), 0) << "n=" << n << " align=" << align;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[i], 1) << "threads=" << threads << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(ThreadPoolTest, ParallelForDynamicLetsAFastThreadTakeASlowThreadsShare) {
  // One thread stalls on its first chunk; the others must drain the rest
  // meanwhile, so the stalled thread ends up with far fewer than 1/threads.
  ThreadPool pool(2);
  const int64_t n = 64;
  std::vector<int> owner(n, -1);
  std::atomic<bool> stalled{false};
  pool.ParallelForDynamic(n, 1, [&](int64_t b, int64_t e) {
    thread_local int me = -1;
    static std::atomic<int> ids{0};
    if (me < 0) me = ids.fetch_add(1);
    if (!stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int64_t i = b; i < e; ++i) owner[i] = me;
  });
  std::vector<int> counts(64, 0);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_GE(owner[i], 0);
    counts[owner[i]] += 1;
  }
  int max_share = 0;
  for (int c : counts) max_share = std::max(max_share, c);
  EXPECT_GE(max_share, n * 3 / 4);
}

TEST(ThreadPoolTest, ManyBackToBackCallsSeeEachOthersWrites) {
  // Each round reads what the previous round wrote on other threads: checks
  // that Run's return orders every worker's writes before the caller's reads.
  ThreadPool pool(4);
  const int64_t n = 64;
  std::vector<int64_t> v(n, 0);
  for (int round = 0; round < 3000; ++round) {
    pool.ParallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[i] += i + 1;
    });
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 3000 * (i + 1));
}

TEST(ThreadPoolTest, SurvivesIdleSleepBetweenCalls) {
  // Workers give up spinning and sleep on the futex; the next call must wake them.
  ThreadPool pool(3);
  std::atomic<int> sum{0};
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pool.Run([&](int index, int) { sum.fetch_add(index + 1); });
  }
  EXPECT_EQ(sum.load(), 5 * (1 + 2 + 3));
}

TEST(ThreadPoolTest, NonPositiveSizeMeansCallerOnly) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 1);
  int calls = 0;
  pool.Run([&](int index, int count) {
    EXPECT_EQ(index, 0);
    EXPECT_EQ(count, 1);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
// Every index of [0, n) visited exactly once by ParallelFor and ParallelForDynamic.
void ExpectCoversOnce(ThreadPool& pool, int n) {
  std::vector<std::atomic<int>> hits(n);
  pool.ParallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  pool.ParallelForDynamic(n, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 2) << "index " << i;
}

// A worker that is not running when a region starts (simulated: worker 1
// sleeps inside every job, as if descheduled) makes an adaptive pool shed it;
// the pool keeps computing correctly on fewer threads and regrows after its
// back-off. A fixed pool keeps its size.
TEST(ThreadPoolTest, AdaptivePoolShedsALateWorkerAndRegrowsLater) {
  auto late_worker = [](int index, int) {
    if (index == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  ThreadPool fixed(2, -1, /*adaptive=*/false);
  for (int i = 0; i < 64; ++i) fixed.Run(late_worker);
  EXPECT_EQ(fixed.size(), 2);

  ThreadPool pool(2, -1, /*adaptive=*/true);
  ExpectCoversOnce(pool, 1000);
  for (int i = 0; i < 64 && pool.size() == 2; ++i) pool.Run(late_worker);
  ASSERT_EQ(pool.size(), 1);
  ExpectCoversOnce(pool, 1000);
  // The first back-off is 100 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  pool.Poll();
  ASSERT_EQ(pool.size(), 2);
  ExpectCoversOnce(pool, 1000);
  std::vector<int> seen(2, 0);
  pool.Run([&](int index, int count) {
    ASSERT_EQ(count, 2);
    seen[index]++;
  });
  EXPECT_EQ(seen, (std::vector<int>{1, 1}));
}

}  // namespace specd::kernels
