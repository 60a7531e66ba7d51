// AVX512-VNNI kernels over 16-row Q4_0 / Q8_0 groups (quant_rows16.h): lane
// r of every vector is row r, so a block costs 8 vpdpbusd per token (each
// with an embedded activation-dword broadcast), one scale multiply and one
// FMA, and the weights of a group are unpacked once for up to 4 tokens at a
// time.
#include "kernels/cpu/quant_rows16.h"

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
// a multi-token pass computes (kernels_bench BM_MatMulRows16 128256 x 2048,
// 4-32 KiB ahead into L1 or L2, docs/performance.md).
constexpr int kPrefetchBytes = 16384;

// The 8 unsigned weight vectors of block b, in the order their activation
// dwords follow: Q4_0 [lo 0..3 | hi 0..3] (dwords 0-3, 4-7 of the block's 8),
// Q8_0 w + 128 for chunks 0..7.
template <bool kQ8>
SPECD_AVX512_TARGET inline void Unpack(const uint8_t* quants, int64_t b, __m512i* u) {
  if (kQ8) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    #pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      u[c] = _mm512_xor_si512(_mm512_loadu_si512(quants + b * 512 + c * 64), bias);
    }
  } else {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i q = _mm512_loadu_si512(quants + b * 256 + c * 64);
      u[c] = _mm512_and_si512(q, m4);
      u[4 + c] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    }
  }
}

// One block of T tokens: lane[t] = fma(float(s_b), f16(dw_b) * da_b, lane[t]).
template <int T, bool kPrefetch, bool kQ8>
SPECD_AVX512_TARGET inline void Block(const uint8_t* scales, const uint8_t* quants,
                                      const int8_t* const* act, const int32_t* const* csum,
                                      const float* const* da, int64_t b, __m512* lane) {
  constexpr int kQuantBytes = kQ8 ? 512 : 256;
  if (kPrefetch) {
    // Past the matrix's end a prefetch is a no-op, not a fault.
    #pragma GCC unroll 8
    for (int c = 0; c < kQuantBytes / 64; ++c) {
      const uint8_t* ahead = quants + b * kQuantBytes + c * 64 + kPrefetchBytes;
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
    }
    if ((b & 1) == 0) {
      const uint8_t* ahead = scales + b * 32 + kPrefetchBytes * 32 / kQuantBytes;
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
    }
  }
  const __m512 dw =
      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * 32)));
  __m512i u[8];
  Unpack<kQ8>(quants, b, u);
  // Vector j pairs with the block's activation dword j (elements 4j ..
  // 4j + 3): Q8_0 chunk j; Q4_0 chunk j's low nibbles (j < 4) or chunk
  // j - 4's high nibbles (elements 16 + 4(j - 4) = 4j).
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const int8_t* a = act[t] + b * 32;
    // Two chains of 4 vpdpbusd instead of one of 8 (measured the same speed
    // as one chain on the Zen 4 guest of docs/performance.md).
    __m512i s0 = _mm512_set1_epi32(csum[t][b]);
    __m512i s1 = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      int32_t a0, a1;
      std::memcpy(&a0, a + 4 * c, 4);
      std::memcpy(&a1, a + 16 + 4 * c, 4);
      s0 = _mm512_dpbusd_epi32(s0, u[c], _mm512_set1_epi32(a0));
      s1 = _mm512_dpbusd_epi32(s1, u[4 + c], _mm512_set1_epi32(a1));
    }
    const __m512i s = _mm512_add_epi32(s0, s1);
    const __m512 cb = _mm512_mul_ps(dw, _mm512_set1_ps(da[t][b]));
    lane[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), cb, lane[t]);
  }
}

template <int T, bool kPrefetch, bool kQ8>
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
    Block<T, kPrefetch, kQ8>(scales, quants, act, csum, da, b, even);
    Block<T, kPrefetch, kQ8>(scales, quants, act, csum, da, b + 1, odd);
  }
  if (b < nb) Block<T, kPrefetch, kQ8>(scales, quants, act, csum, da, b, even);
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ldy, _mm512_add_ps(even[t], odd[t]));
}

// Tokens [t0, t0 + T) of group `grp`.
template <int T, bool kQ8>
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
    Group<T, true, kQ8>(grp, nb, act, cs, da, y + t0 * ldy, ldy);
  } else {
    Group<T, false, kQ8>(grp, nb, act, cs, da, y + t0 * ldy, ldy);
  }
}

// Groups outer, tokens inner: a group (nb * 288 or 544 bytes) stays in L1/L2
// while every chunk of up to 4 tokens passes over it.
template <bool kQ8>
SPECD_AVX512_TARGET void Rows16(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                                const int32_t* csum, float* y, int64_t ldy) {
  const size_t group_bytes = Rows16GroupBytes(kQ8 ? DType::kQ8_0 : DType::kQ4_0, a.nb);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp = w + g * group_bytes;
    float* yg = y + g * kRows16;
    int t0 = 0;
    for (; t0 + kMaxTokens <= a.n_tokens; t0 += kMaxTokens) {
      Tokens<kMaxTokens, kQ8>(grp, a, t0, csum, yg, ldy);
    }
    switch (a.n_tokens - t0) {
      case 1: Tokens<1, kQ8>(grp, a, t0, csum, yg, ldy); break;
      case 2: Tokens<2, kQ8>(grp, a, t0, csum, yg, ldy); break;
      case 3: Tokens<3, kQ8>(grp, a, t0, csum, yg, ldy); break;
      default: break;
    }
  }
}

}  // namespace

Rows16Fn Rows16Avx512(DType dtype) {
  return dtype == DType::kQ8_0 ? Rows16<true> : dtype == DType::kQ4_0 ? Rows16<false> : nullptr;
}

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
Rows16Fn Rows16Avx512(DType) { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
