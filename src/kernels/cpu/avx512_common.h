// Target attribute and horizontal sums shared by the AVX-512 kernel files
// (x86-64 only: include inside `#if defined(__x86_64__)`).
#pragma once

#include <immintrin.h>

#include <cstdint>

// The AVX512-VNNI integer kernels' function target.
#define SPECD_AVX512_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace specd::kernels::cpu {

// Sum of 4 floats.
__attribute__((target("avx512f"))) inline float ReduceAdd128(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of 16 floats. (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.)
__attribute__((target("avx512f"))) inline float ReduceAdd512(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  return ReduceAdd128(_mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)));
}

// Software prefetch of the next row group of a multi-row kernel as ONE
// sequential stream: each Step() prefetches the next lines_per_step lines of
// [next, next + group_bytes) in address order, so n_steps steps cover it.
// A group of R rows is R * row_bytes contiguous bytes; prefetching it row by
// row at the block being worked on (R interleaved streams) left the
// multi-token kernels as slow from DRAM as the sum of their compute and a
// plain read on a Zen 5 guest (docs/performance.md, "Multi-token kernels from
// DRAM"). Prefetches past the matrix do not fault.
class GroupPrefetcher {
 public:
  GroupPrefetcher(const char* next, int64_t group_bytes, int64_t n_steps)
      : p_(next), lines_per_step_(static_cast<int>(((group_bytes + 63) / 64 + n_steps - 1) / n_steps)) {}
  __attribute__((always_inline)) inline void Step() {
    for (int l = 0; l < lines_per_step_; ++l, p_ += 64) _mm_prefetch(p_, _MM_HINT_T0);
  }

 private:
  const char* p_;
  int lines_per_step_;
};

}  // namespace specd::kernels::cpu
