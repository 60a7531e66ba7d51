// AVX512-BF16 kernel over 16-row BF16 groups (bf16_rows16.h): lane r of every
// vector is row r, so a pair of elements costs one vdpbf16ps per token (with
// an embedded broadcast of the token's pair), up to 4 tokens share each weight
// load, and the 16 rows' sums come out of 31 vector adds per token.
#include "kernels/cpu/bf16_rows16.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

constexpr int kMaxTokens = 3;
// Software prefetch into L2 this far ahead in the group stream (as the
// Q4_0 / Q8_0 16-row kernels do, quant_rows16_avx512.cc).
constexpr int kPrefetchBytes = 16384;

template <bool kPrefetch>
SPECD_BF16_TARGET inline void Prefetch(const uint8_t* q) {
  if (kPrefetch) {
    // Past the matrix's end a prefetch is a no-op, not a fault.
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + 128), _MM_HINT_T1);
  }
}

// The block's 4 lanes of vector v (pair 16 v + 4 b + i at chunk i) into
// acc[t][i] for T tokens.
template <int T>
SPECD_BF16_TARGET inline void Vector(const uint8_t* q, const int32_t* const* x, int64_t p,
                                     __m512* acc) {
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512bh wv = (__m512bh)_mm512_loadu_si512(q + 64 * i);
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      acc[4 * t + i] =
          _mm512_dpbf16_ps(acc[4 * t + i], wv, (__m512bh)_mm512_set1_epi32(x[t][p + i]));
    }
  }
}

// The partial last vector: lanes below `lanes` from q, the others a pair of
// zeros (the row kernel's masked tail). Returns the bytes read.
template <int T>
SPECD_BF16_TARGET inline int64_t TailVector(const uint8_t* q, const int32_t* const* x, int64_t p,
                                            int n_lanes, __m512* acc) {
  const __m512i zero = _mm512_setzero_si512();
  int64_t read = 0;
  #pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    if (i < n_lanes) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(q + read);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[4 * t + i] =
            _mm512_dpbf16_ps(acc[4 * t + i], wv, (__m512bh)_mm512_set1_epi32(x[t][p + i]));
      }
      read += 64;
    } else {
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[4 * t + i] = _mm512_dpbf16_ps(acc[4 * t + i], (__m512bh)zero, (__m512bh)zero);
      }
    }
  }
  return read;
}

// Lane block b of one group for T tokens: returns s_l = acc(0, l) + acc(1, l)
// for its 4 lanes in s[4 t + i]; advances q past the block's chunks.
template <int T, bool kPrefetch>
SPECD_BF16_TARGET __attribute__((always_inline)) inline void Block(const uint8_t*& q, int64_t np, int b,
                                    const int32_t* const* x, __m512* s) {
  const int64_t n_full = np / 16;
  const int tail = static_cast<int>(np % 16) - 4 * b;  // lanes of the block in a partial vector
  __m512 even[4 * T], odd[4 * T];
  #pragma GCC unroll 16
  for (int i = 0; i < 4 * T; ++i) even[i] = odd[i] = _mm512_setzero_ps();
  int64_t v = 0;
  for (; v + 2 <= n_full; v += 2) {
    Prefetch<kPrefetch>(q);
    Vector<T>(q, x, 16 * v + 4 * b, even);
    Vector<T>(q + 256, x, 16 * (v + 1) + 4 * b, odd);
    q += 512;
  }
  if (v < n_full) {  // an odd count of full vectors: the last one is even
    Vector<T>(q, x, 16 * v + 4 * b, even);
    q += 256;
    ++v;
  }
  if (np % 16 != 0) {  // vector v is the partial one
    const int lanes = tail < 0 ? 0 : tail;
    q += v % 2 == 0 ? TailVector<T>(q, x, 16 * v + 4 * b, lanes, even)
                    : TailVector<T>(q, x, 16 * v + 4 * b, lanes, odd);
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 4 * T; ++i) s[i] = _mm512_add_ps(even[i], odd[i]);
}

// One group, tokens x[0 .. T): blocks 0 and 2 give s8_i = s_i + s_i+8 for
// i < 4, blocks 1 and 3 for 4 <= i < 8; then + 4, + 2, + 1 (ReduceAdd512).
template <int T, bool kPrefetch>
SPECD_BF16_TARGET void Group(const uint8_t* grp, int64_t np, const int32_t* const* x, float* y,
                             int64_t ldy) {
  const uint8_t* q = grp;
  __m512 lo[4 * T], hi[4 * T], s8a[4 * T], s8b[4 * T];
  Block<T, kPrefetch>(q, np, 0, x, lo);
  Block<T, kPrefetch>(q, np, 2, x, hi);
  #pragma GCC unroll 16
  for (int i = 0; i < 4 * T; ++i) s8a[i] = _mm512_add_ps(lo[i], hi[i]);
  Block<T, kPrefetch>(q, np, 1, x, lo);
  Block<T, kPrefetch>(q, np, 3, x, hi);
  #pragma GCC unroll 16
  for (int i = 0; i < 4 * T; ++i) s8b[i] = _mm512_add_ps(lo[i], hi[i]);
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m512* a = s8a + 4 * t;
    const __m512* b = s8b + 4 * t;
    const __m512 s4_0 = _mm512_add_ps(a[0], b[0]), s4_1 = _mm512_add_ps(a[1], b[1]);
    const __m512 s4_2 = _mm512_add_ps(a[2], b[2]), s4_3 = _mm512_add_ps(a[3], b[3]);
    const __m512 s2_0 = _mm512_add_ps(s4_0, s4_2), s2_1 = _mm512_add_ps(s4_1, s4_3);
    _mm512_storeu_ps(y + t * ldy, _mm512_add_ps(s2_0, s2_1));
  }
}

template <bool kPrefetch>
SPECD_BF16_TARGET void Groups(const uint8_t* w, int64_t n_groups, int64_t k, const uint16_t* xb,
                              int64_t ldx, int n_tokens, float* y, int64_t ldy) {
  const int64_t np = k / 2;
  const size_t group_bytes = static_cast<size_t>(16 * k * 2);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp = w + static_cast<size_t>(g) * group_bytes;
    float* yg = y + g * 16;
    // Chunks of 3 and 2 tokens, never a lone token after others (4 = 2 + 2):
    // a 1-token pass costs about what a 2-token one does. Later chunks read
    // the group from cache: no prefetch.
    for (int t0 = 0, chunk = 0; t0 < n_tokens; t0 += chunk) {
      const int left = n_tokens - t0;
      chunk = left >= kMaxTokens && left != 4 ? kMaxTokens : std::min(left, 2);
      const int32_t* x[kMaxTokens];
      for (int t = 0; t < kMaxTokens; ++t) {
        x[t] = reinterpret_cast<const int32_t*>(xb + std::min(t0 + t, n_tokens - 1) * ldx);
      }
      float* yt = yg + t0 * ldy;
      const bool pf = kPrefetch && t0 == 0;
      switch (chunk) {
        case 3: pf ? Group<3, true>(grp, np, x, yt, ldy) : Group<3, false>(grp, np, x, yt, ldy); break;
        case 2: pf ? Group<2, true>(grp, np, x, yt, ldy) : Group<2, false>(grp, np, x, yt, ldy); break;
        default: pf ? Group<1, true>(grp, np, x, yt, ldy) : Group<1, false>(grp, np, x, yt, ldy); break;
      }
    }
  }
}

void Rows16Avx512(const uint8_t* w, int64_t n_groups, int64_t k, const uint16_t* xb, int64_t ldx,
                  int n_tokens, float* y, int64_t ldy, bool prefetch) {
  if (prefetch) {
    Groups<true>(w, n_groups, k, xb, ldx, n_tokens, y, ldy);
  } else {
    Groups<false>(w, n_groups, k, xb, ldx, n_tokens, y, ldy);
  }
}

}  // namespace

Bf16Rows16Fn Bf16Rows16Avx512() { return Rows16Avx512; }

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
Bf16Rows16Fn Bf16Rows16Avx512() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
