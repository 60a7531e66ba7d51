#include "kernels/read_calibration.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "platform/cpu_features.h"

namespace specd::kernels {
namespace {

// 4 independent 8-float accumulators, so the loop is limited by memory, not
// by add latency.
#define SPECD_READ_LOOP_BODY                                    \
  typedef float V8 __attribute__((vector_size(32)));            \
  V8 acc[4] = {};                                               \
  int64_t i = 0;                                                \
  for (; i + 32 <= n; i += 32) {                                \
    if (kPrefetch) __builtin_prefetch(p + i + kStreamPrefetchBytes / 4); \
    if (kPrefetch) __builtin_prefetch(p + i + kStreamPrefetchBytes / 4 + 16); \
    for (int j = 0; j < 4; ++j) {                               \
      V8 v;                                                     \
      std::memcpy(&v, p + i + 8 * j, sizeof(v));                \
      acc[j] += v;                                              \
    }                                                           \
  }                                                             \
  V8 t = acc[0] + acc[1] + acc[2] + acc[3];                     \
  float s = 0;                                                  \
  for (int j = 0; j < 8; ++j) s += t[j];                        \
  for (; i < n; ++i) s += p[i];                                 \
  return s;

template <bool kPrefetch>
float ReadLoopBaseline(const float* p, int64_t n) {
  SPECD_READ_LOOP_BODY
}
#if defined(__x86_64__)
template <bool kPrefetch>
__attribute__((target("avx2"))) float ReadLoopAvx2(const float* p, int64_t n) {
  SPECD_READ_LOOP_BODY
}
#endif
#undef SPECD_READ_LOOP_BODY

template <bool kPrefetch>
float ReadLoop(const float* p, int64_t n) {
#if defined(__x86_64__)
  if (GetCpuFeatures().avx2) return ReadLoopAvx2<kPrefetch>(p, n);
#endif
  return ReadLoopBaseline<kPrefetch>(p, n);
}

template <bool kPrefetch>
double PassGbps(const float* p, int64_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  volatile float sink = SumFloats(p, n, kPrefetch);
  (void)sink;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s > 0 ? static_cast<double>(n) * sizeof(float) / s / 1e9 : 0;
}

}  // namespace

float SumFloats(const float* p, int64_t n, bool prefetch) {
  return prefetch ? ReadLoop<true>(p, n) : ReadLoop<false>(p, n);
}

namespace {

ReadCalibration Measure() {
  ReadCalibration c;
  const int64_t l3 = GetCpuFeatures().l3_bytes;
  // At most 256 MiB: 2x a per-die L3 of current server parts (a core streams
  // through its own die's L3). A larger reported L3 is a VM's whole-socket or
  // made-up figure, and faulting in a buffer twice that size costs start-up
  // time on every run (docs/performance.md, "Stream decode").
  const size_t bytes = static_cast<size_t>(
      std::clamp<int64_t>(2 * l3, int64_t{64} << 20, int64_t{256} << 20));
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    // No memory for the probe: keep the default (no software prefetch).
    return c;
  }
  // The weights' anonymous copy asks for huge pages too (loader/).
  madvise(mem, bytes, MADV_HUGEPAGE);
  std::memset(mem, 0, bytes);
  const float* p = static_cast<const float*>(mem);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  // Alternate so drift on a shared machine hits both alike; keep the best.
  for (int round = 0; round < 3; ++round) {
    c.plain_gbps = std::max(c.plain_gbps, PassGbps<false>(p, n));
    c.prefetch_gbps = std::max(c.prefetch_gbps, PassGbps<true>(p, n));
  }
  munmap(mem, bytes);
  c.stream_prefetch = c.prefetch_gbps >= kPrefetchMinGain * c.plain_gbps ? kStreamPrefetchBytes : 0;
  return c;
}

}  // namespace

std::string ReadCalibration::Summary() const {
  if (plain_gbps <= 0) return "read probe could not run (no memory): no software prefetch";
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "sequential read %.1f GB/s, with %d B software prefetch %.1f GB/s: stream decode %s",
                plain_gbps, kStreamPrefetchBytes, prefetch_gbps,
                stream_prefetch > 0 ? "prefetches" : "does not prefetch");
  return buf;
}

const ReadCalibration& CalibrateStreamPrefetch() {
  static const ReadCalibration c = Measure();
  return c;
}

}  // namespace specd::kernels
