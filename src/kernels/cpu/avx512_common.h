// Target attribute and horizontal sums shared by the AVX-512 kernel files
// (x86-64 only: include inside `#if defined(__x86_64__)`).
#pragma once

#include <immintrin.h>

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

}  // namespace specd::kernels::cpu
