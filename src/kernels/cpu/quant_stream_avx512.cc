// Row-stream Q4_0 kernel for decode-sized matmuls (1..kGemvMaxTokens tokens),
// AVX512-VNNI: one weight row at a time, front to back, so each thread's
// weight traffic is a single sequential stream (see GemvActs::qs_lanes in
// quant_kernels.h for why and for the activation layout).
//
// Per row, 128-bit lane j of a vector holds the 16 quant bytes of block
// 4g + j; one vpdpbusd per half (elements 0-15 as the low nibbles, 16-31 as
// the high ones) against the rearranged activations advances the 4 blocks,
// and lane j's 4 dwords are block 4g + j's partial sums. Summation order of
// quant_kernels.h: per 16 blocks the 4 group vectors reduce to the 16
// whole-block sums, scaled by f16(dw) * da and folded into the 2 summation
// lanes (Fold16).
#include <vector>

#include "kernels/cpu/quant_kernels.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/avx512_common.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {


constexpr int64_t kBlockBytes = static_cast<int64_t>(sizeof(BlockQ4_0));
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block: f16 scale + 16 nibble bytes");

// The f32 scales of blocks b0 .. b0 + n - 1 of a Q4_0 row (lanes past n: 0).
SPECD_AVX512_TARGET inline __m512 Q4Scales16(const uint8_t* row, int64_t b0, int n) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(kBlockBytes)));
  const __mmask16 m = n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1);
  const __m512i raw =
      _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, row + b0 * kBlockBytes, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

template <int T>
SPECD_AVX512_TARGET void StreamQ4Row(const uint8_t* row, const GemvActs& g, float* y,
                                     int64_t ldy) {
  const int64_t nb = g.nb;
  const int64_t k = nb * 32;
  const int64_t groups = nb / 4;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m128 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();

  // Token t's dword partials of the 4 blocks of group grp (lanes 4j..4j+3:
  // block 4 grp + j).
  __m512i lo[4], hi[4];
  auto unpack = [&](int64_t grp, int slot) SPECD_AVX512_TARGET __attribute__((always_inline)) {
    const uint8_t* p = row + grp * 4 * kBlockBytes;
    // ~One line per group (72 bytes): the few lines skipped are left to the
    // hardware prefetcher.
    if (g.stream_prefetch > 0) _mm_prefetch(reinterpret_cast<const char*>(p) + g.stream_prefetch, _MM_HINT_T0);
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 20)), 1);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 38)), 2);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 56)), 3);
    lo[slot] = _mm512_and_si512(q, m4);
    hi[slot] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
  };
  auto dot = [&](int64_t grp, int slot, int t) SPECD_AVX512_TARGET __attribute__((always_inline)) {
    const int8_t* aq = g.qs_lanes + (t * groups + grp) * 128;
    __m512i i = _mm512_loadu_si512(g.corr + t * nb * 4 + grp * 16);
    i = _mm512_dpbusd_epi32(i, lo[slot], _mm512_loadu_si512(aq));
    return _mm512_dpbusd_epi32(i, hi[slot], _mm512_loadu_si512(aq + 64));
  };
  int64_t grp = 0;
  for (; grp + 4 <= groups; grp += 4) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) unpack(grp + j, j);
    const __m512 dw = Q4Scales16(row, grp * 4, 16);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m512i s = PairSum(PairSum(dot(grp, 0, t), dot(grp + 1, 1, t)),
                                     PairSum(dot(grp + 2, 2, t), dot(grp + 3, 3, t)));
      const __m512 da = _mm512_loadu_ps(g.d + t * nb + grp * 4);
      acc[t] = Fold16(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da), acc[t]);
    }
  }
  const int64_t b0 = grp * 4;
  if (b0 < nb) {
    // The last nb % 16 blocks: whole groups as above, single blocks one by
    // one.
    const int n = static_cast<int>(nb - b0);
    const int n_groups = static_cast<int>(groups - grp);
    for (int j = 0; j < n_groups; ++j) unpack(grp + j, j);
    const __m512 dw = Q4Scales16(row, b0, n);
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);  // n < 16
    const BlockQ4_0* blocks = reinterpret_cast<const BlockQ4_0*>(row);
    const __m128i m4x = _mm_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      __m512i v[4];
      for (int j = 0; j < 4; ++j) v[j] = j < n_groups ? dot(grp + j, j, t) : _mm512_setzero_si512();
      alignas(64) int32_t s[16];
      _mm512_store_si512(s, PairSum(PairSum(v[0], v[1]), PairSum(v[2], v[3])));
      for (int64_t b = groups * 4; b < nb; ++b) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
        const int8_t* aq = g.qs + t * k + b * 32;
        __m128i i = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.corr + t * nb * 4 + b * 4));
        i = _mm_dpbusd_epi32(i, _mm_and_si128(q, m4x), _mm_loadu_si128(reinterpret_cast<const __m128i*>(aq)));
        i = _mm_dpbusd_epi32(i, _mm_and_si128(_mm_srli_epi16(q, 4), m4x),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + 16)));
        alignas(16) int32_t d4[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(d4), i);
        s[b - b0] = d4[0] + d4[1] + d4[2] + d4[3];
      }
      const __m512 da = _mm512_maskz_loadu_ps(m, g.d + t * nb + b0);
      acc[t] = Fold16(_mm512_cvtepi32_ps(_mm512_load_si512(s)), _mm512_mul_ps(dw, da), acc[t], n);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) y[t * ldy] = SumLanes2(acc[t]);
}

template <int T>
SPECD_AVX512_TARGET void StreamQ4Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                      const GemvActs& g, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) StreamQ4Row<T>(w + r * row_bytes, g, y + r, ldy);
}

}  // namespace

SPECD_AVX512_TARGET void BuildStreamLanesAvx512(const QuantizedActs& a, std::vector<int8_t>* qs,
                                                GemvActs* out) {
  const int64_t groups = a.nb / 4;
  qs->resize(static_cast<size_t>(a.n_tokens * groups * 128));
  for (int t = 0; t < a.n_tokens; ++t) {
    for (int64_t grp = 0; grp < groups; ++grp) {
      const int8_t* src = a.qs + t * a.k + grp * 128;
      int8_t* dst = qs->data() + (t * groups + grp) * 128;
      // Source: 4 blocks of (lo 16, hi 16); destination: 4 lo halves, 4 hi halves.
      const __m512i v0 = _mm512_loadu_si512(src);       // b0 lo, b0 hi, b1 lo, b1 hi
      const __m512i v1 = _mm512_loadu_si512(src + 64);  // b2 lo, b2 hi, b3 lo, b3 hi
      _mm512_storeu_si512(dst, _mm512_shuffle_i64x2(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_storeu_si512(dst + 64, _mm512_shuffle_i64x2(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
    }
  }
  out->qs_lanes = qs->data();
}

SPECD_AVX512_TARGET void StreamQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                  const GemvActs& g, const QuantizedActs& a, float* y,
                                  int64_t ldy) {
  switch (g.n_tokens) {
    case 1:
      StreamQ4Rows<1>(w, row_bytes, n_rows, g, y, ldy);
      break;
    case 2:
      StreamQ4Rows<2>(w, row_bytes, n_rows, g, y, ldy);
      break;
    case 3:
      StreamQ4Rows<3>(w, row_bytes, n_rows, g, y, ldy);
      break;
    default:
      StreamQ4Rows<4>(w, row_bytes, n_rows, g, y, ldy);
      break;
  }
}

}  // namespace specd::kernels::cpu

#endif
