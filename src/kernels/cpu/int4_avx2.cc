// AVX2 Q4_BF16 kernels (int4_kernels.h has the contract and the accumulation
// order every kernel here keeps).
//
// A nibble n becomes the exact weight d * (n - 8) as fmsub(float(n), d, 8 d):
// the fused operation rounds once, and the exact result fits in f32.
#include "kernels/cpu/int4_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tensor/dtype.h"

namespace specd::kernels::cpu {
namespace {

#define SPECD_INT4_AVX2_TARGET __attribute__((target("avx2,fma")))

constexpr int64_t kBlockBytes = sizeof(BlockQ4_BF16);
// Tokens sharing one unpacked block (2 accumulators each; 16 ymm registers).
constexpr int kMaxTokens = 4;
constexpr int64_t kChunkRows = 16;

struct Block8 {
  __m256 w[4];  // elements 0-7, 8-15, 16-23, 24-31
};

SPECD_INT4_AVX2_TARGET inline Block8 Unpack(const uint8_t* blk) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  const __m256 scale = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(d) << 16));
  const __m256 scale8 = _mm256_mul_ps(scale, _mm256_set1_ps(8.f));
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
  const __m256i q0 = _mm256_cvtepu8_epi32(q);                     // bytes 0-7
  const __m256i q1 = _mm256_cvtepu8_epi32(_mm_srli_si128(q, 8));  // bytes 8-15
  const __m256i mask = _mm256_set1_epi32(0xf);
  Block8 b;
  b.w[0] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q0, mask)), scale, scale8);
  b.w[1] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q1, mask)), scale, scale8);
  b.w[2] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q0, 4)), scale, scale8);
  b.w[3] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q1, 4)), scale, scale8);
  return b;
}

SPECD_INT4_AVX2_TARGET inline float ReduceAdd256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

SPECD_INT4_AVX2_TARGET inline void Accumulate(const Block8& b, const float* xb, __m256* lo,
                                              __m256* hi) {
  *lo = _mm256_fmadd_ps(b.w[0], _mm256_loadu_ps(xb), *lo);
  *lo = _mm256_fmadd_ps(b.w[1], _mm256_loadu_ps(xb + 8), *lo);
  *hi = _mm256_fmadd_ps(b.w[2], _mm256_loadu_ps(xb + 16), *hi);
  *hi = _mm256_fmadd_ps(b.w[3], _mm256_loadu_ps(xb + 24), *hi);
}

// T tokens (x rows k apart) against one weight row.
template <int T>
SPECD_INT4_AVX2_TARGET void RowTokens(const uint8_t* row, int64_t nb, const float* x, int64_t k,
                                      float* y, int64_t ldy) {
  __m256 lo[T], hi[T];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block8 blk = Unpack(row + b * kBlockBytes);
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) Accumulate(blk, x + t * k + b * kQuantBlock, &lo[t], &hi[t]);
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) y[t * ldy] = ReduceAdd256(_mm256_add_ps(lo[t], hi[t]));
}

// One token against 4 rows side by side (the non-stream decode layout).
SPECD_INT4_AVX2_TARGET void FourRows(const uint8_t* w, size_t row_bytes, int64_t nb,
                                     const float* x, float* y) {
  __m256 lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      Accumulate(Unpack(w + r * row_bytes + b * kBlockBytes), x + b * kQuantBlock, &lo[r], &hi[r]);
    }
  }
  for (int r = 0; r < 4; ++r) y[r] = ReduceAdd256(_mm256_add_ps(lo[r], hi[r]));
}

SPECD_INT4_AVX2_TARGET void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                                 const float* x, int n_tokens, float* y, int64_t ldy, bool stream) {
  const int64_t nb = k / kQuantBlock;
  if (n_tokens == 1) {
    int64_t r = 0;
    if (!stream) {
      for (; r + 4 <= n_rows; r += 4) FourRows(w + r * row_bytes, row_bytes, nb, x, y + r);
    }
    for (; r < n_rows; ++r) RowTokens<1>(w + r * row_bytes, nb, x, k, y + r, ldy);
    return;
  }
  for (int64_t r0 = 0; r0 < n_rows; r0 += kChunkRows) {
    const int64_t r1 = std::min(n_rows, r0 + kChunkRows);
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
      const int nt = std::min(kMaxTokens, n_tokens - t0);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = w + r * row_bytes;
        const float* xt = x + t0 * k;
        float* yt = y + t0 * ldy + r;
        switch (nt) {
          case 1: RowTokens<1>(row, nb, xt, k, yt, ldy); break;
          case 2: RowTokens<2>(row, nb, xt, k, yt, ldy); break;
          case 3: RowTokens<3>(row, nb, xt, k, yt, ldy); break;
          default: RowTokens<4>(row, nb, xt, k, yt, ldy); break;
        }
      }
    }
  }
}

}  // namespace

Int4RowsFn Int4RowsAvx2() { return Rows; }

}  // namespace specd::kernels::cpu

#else

namespace specd::kernels::cpu {
Int4RowsFn Int4RowsAvx2() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
