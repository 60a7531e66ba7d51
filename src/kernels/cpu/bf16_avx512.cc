#include "kernels/cpu/bf16_avx512.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/avx512_common.h"

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))


// T tokens (1..4) against one row, 32 bf16 pairs per vdpbf16ps; two
// accumulators per token alternate to hide the instruction's latency: vector
// j of the row (32 elements) goes to acc[t][j % 2], the masked tail to the
// accumulator of its index (the same order for every T, so a token's outputs
// are bitwise the same alone or in a batch). The loop takes the two vectors
// of a pair in one step with fixed accumulator indices: indexed by a parity
// variable, GCC 12 keeps them on the stack (a load and a store per
// vdpbf16ps). vdpbf16ps issue bounds the loop, so more chains do not help
// (docs/performance.md, "Multi-token kernels from DRAM").
template <int T>
SPECD_BF16_TARGET void RowTile(const uint16_t* w, int64_t k, const uint16_t* xb, int64_t ldx,
                               int t0, float* y, int64_t ldy) {
  __m512 acc0[T], acc1[T];
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  const uint16_t* x0 = xb + t0 * ldx;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    const __m512i w0 = _mm512_loadu_si512(w + i);
    const __m512i w1 = _mm512_loadu_si512(w + i + 32);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const uint16_t* xt = x0 + t * ldx + i;
      acc0[t] = _mm512_dpbf16_ps(acc0[t], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(xt));
      acc1[t] = _mm512_dpbf16_ps(acc1[t], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(xt + 32));
    }
  }
  bool odd = false;  // the next vector's index is odd
  if (i + 32 <= k) {
    const __m512i wv = _mm512_loadu_si512(w + i);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      acc0[t] = _mm512_dpbf16_ps(acc0[t], (__m512bh)wv,
                                 (__m512bh)_mm512_loadu_si512(x0 + t * ldx + i));
    }
    i += 32;
    odd = true;
  }
  if (i < k) {  // tail: masked loads read only the row's remaining elements
    const __mmask32 m = static_cast<__mmask32>((1ull << (k - i)) - 1);
    const __m512i wv = _mm512_maskz_loadu_epi16(m, w + i);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512i xv = _mm512_maskz_loadu_epi16(m, x0 + t * ldx + i);
      if (odd) {
        acc1[t] = _mm512_dpbf16_ps(acc1[t], (__m512bh)wv, (__m512bh)xv);
      } else {
        acc0[t] = _mm512_dpbf16_ps(acc0[t], (__m512bh)wv, (__m512bh)xv);
      }
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    y[(t0 + t) * ldy] = ReduceAdd512(_mm512_add_ps(acc0[t], acc1[t]));
  }
}

}  // namespace

bool HaveBf16Avx512() { return true; }

SPECD_BF16_TARGET void ConvertToBF16Avx512(const float* x, int64_t n, int64_t n_padded,
                                           uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)v);
  }
  if (i < n) {
    __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(out + i, m, (__m256i)v);
    i = n;
  }
  for (; i < n_padded; ++i) out[i] = 0;
}

SPECD_BF16_TARGET void MatRowsBF16Avx512(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                         int64_t k, const uint16_t* xb, int64_t ldx, int n_tokens,
                                         float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(w + r * row_bytes);
    int t0 = 0;
    for (; t0 + 4 <= n_tokens; t0 += 4) RowTile<4>(row, k, xb, ldx, t0, y + r, ldy);
    switch (n_tokens - t0) {
      case 3: RowTile<3>(row, k, xb, ldx, t0, y + r, ldy); break;
      case 2: RowTile<2>(row, k, xb, ldx, t0, y + r, ldy); break;
      case 1: RowTile<1>(row, k, xb, ldx, t0, y + r, ldy); break;
      default: break;
    }
  }
}

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
bool HaveBf16Avx512() { return false; }
void ConvertToBF16Avx512(const float*, int64_t, int64_t, uint16_t*) {}
void MatRowsBF16Avx512(const uint8_t*, size_t, int64_t, int64_t, const uint16_t*, int64_t, int,
                       float*, int64_t) {}
}  // namespace specd::kernels::cpu

#endif
