// Whether the decode kernels that read one weight row at a time (stream
// decode) should prefetch ahead along the row in software. Machines disagree:
// on a Zen 4 guest software prefetch 1 KiB ahead slowed a plain sequential
// read (docs/performance.md, "Stream decode"); on an Intel VM the prefetching
// read was the faster one. So it is measured once per process on this
// machine instead of being keyed by CPU model.
#pragma once

#include <cstdint>
#include <string>

namespace specd::kernels {

struct ReadCalibration {
  double plain_gbps = 0;     // sequential read, no software prefetch (best of rounds)
  double prefetch_gbps = 0;  // the same read with prefetch kStreamPrefetchBytes ahead
  int stream_prefetch = 0;   // the choice: kStreamPrefetchBytes or 0
  std::string Summary() const;  // one line: both figures and the choice
};

// Distance the stream kernels prefetch ahead when prefetch is on.
constexpr int kStreamPrefetchBytes = 1024;
// Prefetch is chosen only when it reads at least this much faster (noise).
constexpr double kPrefetchMinGain = 1.05;

// Sum of n floats read front to back with 32-byte loads (AVX2 where the CPU
// has it: 16-byte loads under-report the bandwidth one core can reach),
// prefetching kStreamPrefetchBytes ahead when `prefetch`. The loop the
// calibration times; kernels_bench's bandwidth probe runs it too.
float SumFloats(const float* p, int64_t n, bool prefetch);

// Runs the measurement the first time (reads a buffer of twice the last-level
// cache, 64-256 MiB, alternating plain and prefetching passes; ~0.1-0.3 s, more
// where a VM faults fresh memory in slowly) and returns the cached result
// afterwards. Thread-safe.
const ReadCalibration& CalibrateStreamPrefetch();

}  // namespace specd::kernels
