// AVX2 Q4_BF16 kernels (int4_kernels.h has the contract and the accumulation
// order every kernel here keeps); the same structure as int4_avx512.cc with
// 8-lane vectors and 4 tokens per unpacked block (16 registers).
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
constexpr int kMaxTokens = 4;
// Row groups and k chunks as in int4_avx512.cc: the chunk's panel (4 tokens x
// 512 floats, 8 KiB) and the group's accumulators (4 KiB) stay in L1.
constexpr int64_t kChunkRows = 16;
constexpr int64_t kChunkBlocks = 16;

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

// The canonical order of one block: lo gets elements 0-7 then 8-15, hi 16-23
// then 24-31.
SPECD_INT4_AVX2_TARGET inline void Accumulate(const Block8& b, const float* xb, __m256* lo,
                                              __m256* hi) {
  *lo = _mm256_fmadd_ps(b.w[0], _mm256_loadu_ps(xb), *lo);
  *lo = _mm256_fmadd_ps(b.w[1], _mm256_loadu_ps(xb + 8), *lo);
  *hi = _mm256_fmadd_ps(b.w[2], _mm256_loadu_ps(xb + 16), *hi);
  *hi = _mm256_fmadd_ps(b.w[3], _mm256_loadu_ps(xb + 24), *hi);
}

// One token against R rows side by side (decode: R = 4, and 1 for the rest).
template <int R>
SPECD_INT4_AVX2_TARGET void DecodeRows(const uint8_t* w, size_t row_bytes, int64_t nb,
                                       const float* x, float* y) {
  __m256 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      Accumulate(Unpack(w + r * row_bytes + b * kBlockBytes), x + b * kQuantBlock, &lo[r], &hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = ReduceAdd256(_mm256_add_ps(lo[r], hi[r]));
}

// T tokens against nb blocks of one row, continuing acc[2t] (lo) and
// acc[2t + 1] (hi). panel: (nb, T, 32) activations.
template <int T>
SPECD_INT4_AVX2_TARGET void RowTokensChunk(const uint8_t* row, int64_t nb, const float* panel,
                                           __m256* acc) {
  __m256 lo[T], hi[T];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    lo[t] = acc[2 * t];
    hi[t] = acc[2 * t + 1];
  }
  for (int64_t b = 0; b < nb; ++b) {
    const Block8 blk = Unpack(row + b * kBlockBytes);
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      Accumulate(blk, panel + (b * T + t) * kQuantBlock, &lo[t], &hi[t]);
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    acc[2 * t] = lo[t];
    acc[2 * t + 1] = hi[t];
  }
}

SPECD_INT4_AVX2_TARGET void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                                 const float* x, int n_tokens, float* y, int64_t ldy) {
  const int64_t nb = k / kQuantBlock;
  if (n_tokens == 1) {
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) DecodeRows<4>(w + r * row_bytes, row_bytes, nb, x, y + r);
    for (; r < n_rows; ++r) DecodeRows<1>(w + r * row_bytes, row_bytes, nb, x, y + r);
    return;
  }
  __m256 acc[kChunkRows][kMaxTokens * 2];  // (rows, tokens, lo/hi)
  alignas(32) float panel[kChunkBlocks * kMaxTokens * kQuantBlock];
  for (int64_t r0 = 0; r0 < n_rows; r0 += kChunkRows) {
    const int64_t nr = std::min(kChunkRows, n_rows - r0);
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
      const int nt = std::min(kMaxTokens, n_tokens - t0);
      for (int64_t r = 0; r < nr; ++r) {
        for (int i = 0; i < 2 * nt; ++i) acc[r][i] = _mm256_setzero_ps();
      }
      for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const int64_t nbc = std::min(kChunkBlocks, nb - b0);
        for (int64_t b = 0; b < nbc; ++b) {
          for (int t = 0; t < nt; ++t) {
            std::memcpy(panel + (b * nt + t) * kQuantBlock,
                        x + (t0 + t) * k + (b0 + b) * kQuantBlock, kQuantBlock * sizeof(float));
          }
        }
        for (int64_t r = 0; r < nr; ++r) {
          const uint8_t* row = w + (r0 + r) * row_bytes + b0 * kBlockBytes;
          switch (nt) {
            case 1: RowTokensChunk<1>(row, nbc, panel, acc[r]); break;
            case 2: RowTokensChunk<2>(row, nbc, panel, acc[r]); break;
            case 3: RowTokensChunk<3>(row, nbc, panel, acc[r]); break;
            default: RowTokensChunk<4>(row, nbc, panel, acc[r]); break;
          }
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        for (int t = 0; t < nt; ++t) {
          y[(t0 + t) * ldy + r0 + r] =
              ReduceAdd256(_mm256_add_ps(acc[r][2 * t], acc[r][2 * t + 1]));
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
