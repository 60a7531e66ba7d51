// AVX-512 Q4_BF16 kernels (int4_kernels.h has the contract and the
// accumulation order every kernel here keeps).
//
// A block unpacks in 7 instructions: the 16-entry table {-8 .. 7} times the
// block's scale (exact) is indexed by each nibble with vpermps, which reads
// only the low 4 bits of each index lane, so the low nibbles need no mask.
#include "kernels/cpu/int4_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/avx512_common.h"
#include "tensor/dtype.h"

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_INT4_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

constexpr int64_t kBlockBytes = sizeof(BlockQ4_BF16);
// Tokens sharing one unpacked block in the multi-token kernel (2 accumulators
// each: 16 of the 32 vector registers).
constexpr int kMaxTokens = 8;
// Rows kept hot (L1/L2) while every token chunk passes over them.
constexpr int64_t kChunkRows = 16;

// Elements 0-15 (lo) and 16-31 (hi) of a block as exact f32 weights.
SPECD_INT4_TARGET inline void Unpack(const uint8_t* blk, __m512 table, __m512* lo, __m512* hi) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  const __m512 scale = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int32_t>(d) << 16));
  const __m512 ts = _mm512_mul_ps(table, scale);
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
  *lo = _mm512_permutexvar_ps(q, ts);
  *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), ts);
}

SPECD_INT4_TARGET inline __m512 Table() {
  return _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
}

// T tokens (x rows k apart) against one weight row.
template <int T>
SPECD_INT4_TARGET void RowTokens(const uint8_t* row, int64_t nb, const float* x, int64_t k,
                                 float* y, int64_t ldy) {
  const __m512 table = Table();
  __m512 lo[T], hi[T];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512 wlo, whi;
    Unpack(row + b * kBlockBytes, table, &wlo, &whi);
    const float* xb = x + b * kQuantBlock;
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      lo[t] = _mm512_fmadd_ps(wlo, _mm512_loadu_ps(xb + t * k), lo[t]);
      hi[t] = _mm512_fmadd_ps(whi, _mm512_loadu_ps(xb + t * k + 16), hi[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) y[t * ldy] = ReduceAdd512(_mm512_add_ps(lo[t], hi[t]));
}

// One token against 4 rows side by side (the non-stream decode layout): the
// same per-row order as RowTokens<1>.
SPECD_INT4_TARGET void FourRows(const uint8_t* w, size_t row_bytes, int64_t nb, const float* x,
                                float* y) {
  const __m512 table = Table();
  __m512 lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 xlo = _mm512_loadu_ps(x + b * kQuantBlock);
    const __m512 xhi = _mm512_loadu_ps(x + b * kQuantBlock + 16);
    #pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      __m512 wlo, whi;
      Unpack(w + r * row_bytes + b * kBlockBytes, table, &wlo, &whi);
      lo[r] = _mm512_fmadd_ps(wlo, xlo, lo[r]);
      hi[r] = _mm512_fmadd_ps(whi, xhi, hi[r]);
    }
  }
  for (int r = 0; r < 4; ++r) y[r] = ReduceAdd512(_mm512_add_ps(lo[r], hi[r]));
}

SPECD_INT4_TARGET void RowTokensN(int n, const uint8_t* row, int64_t nb, const float* x, int64_t k,
                                  float* y, int64_t ldy) {
  switch (n) {
    case 1: RowTokens<1>(row, nb, x, k, y, ldy); return;
    case 2: RowTokens<2>(row, nb, x, k, y, ldy); return;
    case 3: RowTokens<3>(row, nb, x, k, y, ldy); return;
    case 4: RowTokens<4>(row, nb, x, k, y, ldy); return;
    case 5: RowTokens<5>(row, nb, x, k, y, ldy); return;
    case 6: RowTokens<6>(row, nb, x, k, y, ldy); return;
    case 7: RowTokens<7>(row, nb, x, k, y, ldy); return;
    default: RowTokens<8>(row, nb, x, k, y, ldy); return;
  }
}

SPECD_INT4_TARGET void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
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
        RowTokensN(nt, w + r * row_bytes, nb, x + t0 * k, k, y + t0 * ldy + r, ldy);
      }
    }
  }
}

}  // namespace

Int4RowsFn Int4RowsAvx512() { return Rows; }

}  // namespace specd::kernels::cpu

#else

namespace specd::kernels::cpu {
Int4RowsFn Int4RowsAvx512() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
