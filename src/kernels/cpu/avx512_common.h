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

// Sum of 16 floats: lanes i + (i + 8), then i + 4, i + 2, i + 1. (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.)
__attribute__((target("avx512f"))) inline float ReduceAdd512(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  return ReduceAdd128(_mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)));
}

// The summation order's sum (quant_kernels.h) of its 2 lane vectors (vector
// l at lanes + l * stride floats, 64-aligned), element by element.
__attribute__((target("avx512f"))) inline __m512 SumLaneVectors(const float* lanes, int64_t stride) {
  return _mm512_add_ps(_mm512_load_ps(lanes), _mm512_load_ps(lanes + stride));
}

// The summation order's sum within each 128-bit lane x of v (lanes 4x and
// 4x + 1 hold the 2 summation lanes): returns it in lane 4x.
__attribute__((target("avx512f"))) inline __m512 SumLanesInLane(__m512 v) {
  return _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
}

// lane 0 + lane 1 of acc.
__attribute__((target("avx512f"))) inline float SumLanes2(__m128 acc) {
  return _mm_cvtss_f32(_mm_add_ss(acc, _mm_movehdup_ps(acc)));
}

// Folds the terms f[j] * c[j] (one FMA rounding each) of n consecutive blocks
// (n <= 4, the first at an even index) into the 2 summation lanes (lanes 0, 1
// of acc) in block order.
SPECD_AVX512_TARGET inline __m128 Fold4(__m128 f, __m128 c, __m128 acc, int n = 4) {
  acc = _mm_mask3_fmadd_ps(f, c, acc, static_cast<__mmask8>(n >= 2 ? 0x3 : 0x1));
  if (n > 2) {
    acc = _mm_mask3_fmadd_ps(_mm_movehl_ps(f, f), _mm_movehl_ps(c, c), acc,
                             static_cast<__mmask8>(n >= 4 ? 0x3 : 0x1));
  }
  return acc;
}

// The same for 16 consecutive blocks (n <= 16 of them, the first at an even
// index): 8 chained 2-lane FMAs.
SPECD_AVX512_TARGET inline __m128 Fold16(__m512 f, __m512 c, __m128 acc, int n = 16) {
  acc = Fold4(_mm512_castps512_ps128(f), _mm512_castps512_ps128(c), acc, n >= 4 ? 4 : n);
  if (n > 4) {
    acc = Fold4(_mm512_extractf32x4_ps(f, 1), _mm512_extractf32x4_ps(c, 1), acc,
                n >= 8 ? 4 : n - 4);
  }
  if (n > 8) {
    acc = Fold4(_mm512_extractf32x4_ps(f, 2), _mm512_extractf32x4_ps(c, 2), acc,
                n >= 12 ? 4 : n - 8);
  }
  if (n > 12) {
    acc = Fold4(_mm512_extractf32x4_ps(f, 3), _mm512_extractf32x4_ps(c, 3), acc, n - 12);
  }
  return acc;
}

// Two vectors of dword partial sums, each run of n consecutive lanes one
// block (n = 8, 4 or 2) -> one vector with n / 2 lanes per block, a's blocks
// first, then b's (exact integer adds). Three levels turn 8 vectors of 2
// blocks, or two levels 4 vectors of 4 blocks, into 16 whole-block sums in
// block order.
SPECD_AVX512_TARGET inline __m512i PairSum(__m512i a, __m512i b) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
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
