// Row-stream Q4_0 kernel for decode-sized matmuls (1..kGemvMaxTokens tokens),
// AVX512-VNNI: one weight row at a time, front to back, so each thread's
// weight traffic is a single sequential stream (see GemvActs::qs_lanes in
// quant_kernels.h for why and for the activation layout).
//
// Per row, 128-bit lane j of a vector holds the 16 quant bytes of block
// 4g + j; one vpdpbusd per half (elements 0-15 as the low nibbles, 16-31 as
// the high ones) against the rearranged activations advances the 4 blocks,
// and lane j's 4 dwords are block 4g + j's partial sums. The group's 4 f16
// scales come from one word permute, and are multiplied lane by lane with the
// token's da (GemvActs::d_lanes, spread to the lanes once per call).
//
// Summation order per (row, token): two f32 accumulators alternate over the
// 4-block groups, then their sum is reduced over the 16 lanes, then the last
// nb % 4 blocks are added one by one. It differs from the other Q4_0 kernels
// in f32 rounding only (the integer block dots are exact).
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

template <int T>
SPECD_AVX512_TARGET void StreamQ4Row(const uint8_t* row, const GemvActs& g, float* y,
                                     int64_t ldy) {
  const int64_t nb = g.nb;
  const int64_t k = nb * 32;
  const int64_t groups = nb / 4;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // A group of 4 blocks is 72 bytes = 36 words (every field is word-aligned):
  // block j's scale is word 9j, its quant bytes bytes 18j + 2 .. 18j + 17. The
  // 4 scales come from one 64-byte load by a word permute (sidx: word l = the
  // scale of block l / 4); the quant bytes by 4 loads into the 128-bit lanes
  // (a gather of the scales and a vpermt2w of the quant bytes were slower;
  // docs/performance.md, "Stream decode").
  const __m512i sidx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                        27, 27, 27, 27, 18, 18, 18, 18, 9, 9, 9, 9, 0, 0, 0, 0);
  __m512 acc[T][2];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();

  // One group of 4 blocks into acc[t][parity]. Called with a constant parity
  // from a loop over group pairs: with the parity a loop variable GCC keeps
  // both accumulators on the stack, an FMA from memory and a store per group
  // in the decode loop.
  auto group = [&](int64_t grp, int parity) SPECD_AVX512_TARGET __attribute__((always_inline)) {
    const uint8_t* p = row + grp * 4 * kBlockBytes;
    // ~One line per group (72 bytes): the few lines skipped are left to the
    // hardware prefetcher.
    if (g.stream_prefetch > 0) _mm_prefetch(reinterpret_cast<const char*>(p) + g.stream_prefetch, _MM_HINT_T0);
    const __m512i v0 = _mm512_loadu_si512(p);
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 20)), 1);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 38)), 2);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 56)), 3);
    const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, v0)));
    const __m512i lo = _mm512_and_si512(q, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int64_t tg = t * groups + grp;
      const int8_t* aq = g.qs_lanes + tg * 128;
      __m512i i = _mm512_loadu_si512(g.corr + t * nb * 4 + grp * 16);
      i = _mm512_dpbusd_epi32(i, lo, _mm512_loadu_si512(aq));
      i = _mm512_dpbusd_epi32(i, hi, _mm512_loadu_si512(aq + 64));
      const __m512 sc = _mm512_mul_ps(dw, _mm512_loadu_ps(g.d_lanes + tg * 16));
      acc[t][parity] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), sc, acc[t][parity]);
    }
  };
  int64_t grp = 0;
  for (; grp + 2 <= groups; grp += 2) {
    group(grp, 0);
    group(grp + 1, 1);
  }
  if (grp < groups) group(grp, 0);
  int64_t b = groups * 4;
  const BlockQ4_0* blocks = reinterpret_cast<const BlockQ4_0*>(row);
  float tail[T] = {};
  const __m128i m4x = _mm_set1_epi8(0x0F);
  for (; b < nb; ++b) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs));
    const __m128i lo = _mm_and_si128(q, m4x);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4x);
    const float dw = _cvtsh_ss(blocks[b].d);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* aq = g.qs + t * k + b * 32;
      __m128i i = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.corr + t * nb * 4 + b * 4));
      i = _mm_dpbusd_epi32(i, lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(aq)));
      i = _mm_dpbusd_epi32(i, hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + 16)));
      tail[t] += ReduceAdd128(_mm_cvtepi32_ps(i)) * (dw * g.d[t * nb + b]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    y[t * ldy] = ReduceAdd512(_mm512_add_ps(acc[t][0], acc[t][1])) + tail[t];
  }
}

template <int T>
SPECD_AVX512_TARGET void StreamQ4Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                      const GemvActs& g, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) StreamQ4Row<T>(w + r * row_bytes, g, y + r, ldy);
}

}  // namespace

SPECD_AVX512_TARGET void BuildStreamLanesAvx512(const QuantizedActs& a, std::vector<int8_t>* qs,
                                                std::vector<float>* d, GemvActs* out) {
  const int64_t groups = a.nb / 4;
  qs->resize(static_cast<size_t>(a.n_tokens * groups * 128));
  d->resize(static_cast<size_t>(a.n_tokens * groups * 16));
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (int t = 0; t < a.n_tokens; ++t) {
    for (int64_t grp = 0; grp < groups; ++grp) {
      const int8_t* src = a.qs + t * a.k + grp * 128;
      int8_t* dst = qs->data() + (t * groups + grp) * 128;
      // Source: 4 blocks of (lo 16, hi 16); destination: 4 lo halves, 4 hi halves.
      const __m512i v0 = _mm512_loadu_si512(src);       // b0 lo, b0 hi, b1 lo, b1 hi
      const __m512i v1 = _mm512_loadu_si512(src + 64);  // b2 lo, b2 hi, b3 lo, b3 hi
      _mm512_storeu_si512(dst, _mm512_shuffle_i64x2(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)));
      _mm512_storeu_si512(dst + 64, _mm512_shuffle_i64x2(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
      const __m128 d4 = _mm_loadu_ps(a.d + t * a.nb + grp * 4);
      _mm512_storeu_ps(d->data() + (t * groups + grp) * 16,
                       _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(d4)));
    }
  }
  out->qs_lanes = qs->data();
  out->d_lanes = d->data();
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
