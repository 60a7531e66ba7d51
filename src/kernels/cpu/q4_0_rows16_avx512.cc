// AVX512-VNNI kernel over 16-row Q4_0 groups (q4_0_rows16.h): lane r of
// every vector is row r, so a block costs 8 vpdpbusd per token (each with an
// embedded activation-dword broadcast), one scale multiply and one FMA, and
// the weights of a group are unpacked once for up to 4 tokens at a time.
#include "kernels/cpu/q4_0_rows16.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx512_common.h"

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

constexpr int kMaxTokens = 4;
// Software prefetch into L2 this far ahead in the group stream when
// QuantizedActs::prefetch_rows > 0 (about 57 blocks): it keeps DRAM busy while
// a multi-token pass computes (kernels_bench BM_MatMulQ4Rows16 128256 x 2048,
// 4-32 KiB ahead into L1 or L2, docs/performance.md).
constexpr int kPrefetchBytes = 16384;

// One block of T tokens: lane[t] = fma(float(s_b), f16(dw_b) * da_b, lane[t]).
template <int T, bool kPrefetch>
SPECD_AVX512_TARGET inline void Block(const uint8_t* scales, const uint8_t* quants,
                                      const int8_t* const* act, const int32_t* const* csum,
                                      const float* const* da, int64_t b, __m512* lane) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if (kPrefetch) {
    // Past the matrix's end a prefetch is a no-op, not a fault.
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      _mm_prefetch(reinterpret_cast<const char*>(quants + b * 256 + c * 64 + kPrefetchBytes),
                   _MM_HINT_T1);
    }
    if ((b & 1) == 0) {
      _mm_prefetch(reinterpret_cast<const char*>(scales + b * 32 + kPrefetchBytes / 8), _MM_HINT_T1);
    }
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * 32)));
  __m512i lo[4], hi[4];
  #pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i q = _mm512_loadu_si512(quants + b * 256 + c * 64);
    lo[c] = _mm512_and_si512(q, m4);
    hi[c] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int8_t* a = act[t] + b * 32;
    // Two chains (low and high nibbles) halve the vpdpbusd latency chain.
    __m512i s_lo = _mm512_set1_epi32(csum[t][b]);
    __m512i s_hi = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      int32_t a_lo, a_hi;
      std::memcpy(&a_lo, a + 4 * c, 4);
      std::memcpy(&a_hi, a + 16 + 4 * c, 4);
      s_lo = _mm512_dpbusd_epi32(s_lo, lo[c], _mm512_set1_epi32(a_lo));
      s_hi = _mm512_dpbusd_epi32(s_hi, hi[c], _mm512_set1_epi32(a_hi));
    }
    const __m512i s = _mm512_add_epi32(s_lo, s_hi);
    const __m512 cb = _mm512_mul_ps(dw, _mm512_set1_ps(da[t][b]));
    lane[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), cb, lane[t]);
  }
}

template <int T, bool kPrefetch>
SPECD_AVX512_TARGET void Group(const uint8_t* grp, int64_t nb, const int8_t* const* act,
                               const int32_t* const* csum, const float* const* da, float* y,
                               int64_t ldy) {
  const uint8_t* scales = grp;
  const uint8_t* quants = grp + nb * 32;
  __m512 even[T], odd[T];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    Block<T, kPrefetch>(scales, quants, act, csum, da, b, even);
    Block<T, kPrefetch>(scales, quants, act, csum, da, b + 1, odd);
  }
  if (b < nb) Block<T, kPrefetch>(scales, quants, act, csum, da, b, even);
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ldy, _mm512_add_ps(even[t], odd[t]));
}

// Tokens [t0, t0 + T) of group `grp`.
template <int T>
SPECD_AVX512_TARGET void Tokens(const uint8_t* grp, const QuantizedActs& a, int t0,
                                const int32_t* csum, float* y, int64_t ldy) {
  const int64_t nb = a.nb;
  const int8_t* act[T];
  const int32_t* cs[T];
  const float* da[T];
  for (int t = 0; t < T; ++t) {
    act[t] = a.qs + (t0 + t) * a.k;
    cs[t] = csum + (t0 + t) * nb;
    da[t] = a.d + (t0 + t) * nb;
  }
  // Only the first pass over a group reads it from memory.
  if (a.prefetch_rows > 0 && t0 == 0) {
    Group<T, true>(grp, nb, act, cs, da, y + t0 * ldy, ldy);
  } else {
    Group<T, false>(grp, nb, act, cs, da, y + t0 * ldy, ldy);
  }
}

// Groups outer, tokens inner: a group (nb * 288 bytes) stays in L1/L2 while
// every chunk of up to 4 tokens passes over it.
SPECD_AVX512_TARGET void Rows16Q4(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                                  const int32_t* csum, float* y, int64_t ldy) {
  const size_t group_bytes = Rows16GroupBytes(a.nb);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp = w + g * group_bytes;
    float* yg = y + g * kRows16;
    int t0 = 0;
    for (; t0 + kMaxTokens <= a.n_tokens; t0 += kMaxTokens) {
      Tokens<kMaxTokens>(grp, a, t0, csum, yg, ldy);
    }
    switch (a.n_tokens - t0) {
      case 1: Tokens<1>(grp, a, t0, csum, yg, ldy); break;
      case 2: Tokens<2>(grp, a, t0, csum, yg, ldy); break;
      case 3: Tokens<3>(grp, a, t0, csum, yg, ldy); break;
      default: break;
    }
  }
}

}  // namespace

Rows16Fn Rows16Q4Avx512() { return Rows16Q4; }

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
Rows16Fn Rows16Q4Avx512() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
