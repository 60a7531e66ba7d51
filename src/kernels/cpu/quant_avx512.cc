// AVX512-VNNI Q8_0 / Q4_0 kernels: two 32-element blocks per 512-bit vector,
// vpdpbusd with the weight as the unsigned operand (see quant_kernels.h for
// the offset correction). Compiled with a function target attribute; chosen at
// run time by the platform probe.
#include <vector>

#include "kernels/cpu/quant_kernels.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_AVX512_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

// Sum of 16 floats. (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.)
SPECD_AVX512_TARGET inline float ReduceAdd512(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The 64 unsigned weight bytes of blocks b, b+1 in activation order:
// [blk b elems 0..31 | blk b+1 elems 0..31].
SPECD_AVX512_TARGET inline __m512i LoadPairU8(const BlockQ8_0* blk) {
  __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
  __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs));
  __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  return _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));  // w + 128
}

SPECD_AVX512_TARGET inline __m512i LoadPairU8(const BlockQ4_0* blk) {
  __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
  __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs));
  __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
  // 128-bit lanes: [q0 lo, q1 lo, q0 hi, q1 hi] -> [q0 lo, q0 hi, q1 lo, q1 hi].
  __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
  both = _mm512_and_si512(both, _mm512_set1_epi8(0x0F));
  return _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0));
}

SPECD_AVX512_TARGET inline __m256i LoadOneU8(const BlockQ8_0& blk) {
  __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
  return _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
}

SPECD_AVX512_TARGET inline __m256i LoadOneU8(const BlockQ4_0& blk) {
  __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
  __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// T tokens (1..4) against one weight row, two blocks per step; two
// accumulators per token alternate so the FMA latency chain stays hidden.
template <int T, typename Block>
SPECD_AVX512_TARGET void RowTile(const Block* row, const QuantizedActs& a, int t0, float* y,
                                 int64_t ldy) {
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[T][2];
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  const int8_t* aq[T];
  const float* ad[T];
  const int32_t* ac[T];
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    aq[t] = a.qs + (t0 + t) * a.k;
    ad[t] = a.d + (t0 + t) * a.nb;
    ac[t] = a.corr + (t0 + t) * a.nb * 8;
  }
  int64_t b = 0;
  int p = 0;
  for (; b + 2 <= a.nb; b += 2, p ^= 1) {
    __m512i wu = LoadPairU8(row + b);
    // f16 scales of both blocks -> (dw_b, dw_b+1) in lanes 0, 1.
    uint32_t dd = static_cast<uint32_t>(row[b].d) | (static_cast<uint32_t>(row[b + 1].d) << 16);
    __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dd)));
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512i init = _mm512_loadu_si512(ac[t] + b * 8);
      __m512i av = _mm512_loadu_si512(aq[t] + b * 32);
      __m512i idot = _mm512_dpbusd_epi32(init, wu, av);
      __m128 da = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(ad[t] + b)));
      __m512 s = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(dw, da)));
      acc[t][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot), s, acc[t][p]);
    }
  }
  float tail[T] = {};
  if (b < a.nb) {  // odd number of blocks: the last one with 256-bit ops
    __m256i wu = LoadOneU8(row[b]);
    float dw = _cvtsh_ss(row[b].d);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m256i init = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ac[t] + b * 8));
      __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq[t] + b * 32));
      __m256i idot = _mm256_dpbusd_epi32(init, wu, av);
      __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(idot), _mm256_set1_ps(dw * ad[t][b]));
      __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
      s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
      s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
      tail[t] = _mm_cvtss_f32(s4);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    y[(t0 + t) * ldy] = ReduceAdd512(_mm512_add_ps(acc[t][0], acc[t][1])) + tail[t];
  }
}

template <typename Block>
SPECD_AVX512_TARGET void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                              const QuantizedActs& a, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    int t0 = 0;
    for (; t0 + 4 <= a.n_tokens; t0 += 4) RowTile<4>(row, a, t0, y + r, ldy);
    switch (a.n_tokens - t0) {
      case 3: RowTile<3>(row, a, t0, y + r, ldy); break;
      case 2: RowTile<2>(row, a, t0, y + r, ldy); break;
      case 1: RowTile<1>(row, a, t0, y + r, ldy); break;
      default: break;
    }
  }
}

SPECD_AVX512_TARGET void RowsQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                const QuantizedActs& a, float* y, int64_t ldy) {
  Rows<BlockQ8_0>(w, row_bytes, n_rows, a, y, ldy);
}

SPECD_AVX512_TARGET void RowsQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                const QuantizedActs& a, float* y, int64_t ldy) {
  Rows<BlockQ4_0>(w, row_bytes, n_rows, a, y, ldy);
}

// The signed bytes of one block (Q4_0: nibble - 8) and their sum.
SPECD_AVX512_TARGET inline __m256i LoadOneS8(const BlockQ8_0& blk) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
}
SPECD_AVX512_TARGET inline __m256i LoadOneS8(const BlockQ4_0& blk) {
  return _mm256_sub_epi8(LoadOneU8(blk), _mm256_set1_epi8(8));
}
SPECD_AVX512_TARGET inline int32_t SumS8(__m256i v) {
  // vpdpbusd with all-ones unsigned bytes sums groups of 4 signed bytes.
  __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), v);
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s4);
}

// Token-lane kernel: R weight rows against every 16-token tile. The rows are
// first unpacked once per row group into signed bytes, f32 scales and
// -128 * block sums; then per block the 8 activation vectors are loaded once
// and each weight dword is a broadcast memory operand of vpdpbusd (one fused
// uop per 4 elements x 16 tokens). Two i32 accumulators per row (even / odd
// groups) keep enough independent vpdpbusd chains in flight.
template <int R, typename Block>
SPECD_AVX512_TARGET void TiledRowGroup(const uint8_t* w, size_t row_bytes, const TiledActs& a,
                                       int n_tokens, float* y, int64_t ldy, int8_t* wbuf,
                                       float* dwb, int32_t* wcorr) {
  const int64_t nb = a.nb;
  const int64_t k = nb * 32;
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i v = LoadOneS8(row[b]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(wbuf + r * k + b * 32), v);
      dwb[r * nb + b] = _cvtsh_ss(row[b].d);
      wcorr[r * nb + b] = -128 * SumS8(v);
    }
  }
  for (int tile = 0; tile < a.n_tiles; ++tile) {
    const uint8_t* aq = a.qs + tile * nb * 512;
    const float* ad = a.d + tile * nb * 16;
    __m512 acc[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m512i av[8];
      #pragma GCC unroll 16
      for (int g = 0; g < 8; ++g) av[g] = _mm512_loadu_si512(aq + b * 512 + g * 64);
      __m512i i0[R], i1[R];
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        i0[r] = _mm512_set1_epi32(wcorr[r * nb + b]);
        i1[r] = _mm512_setzero_si512();
      }
      #pragma GCC unroll 16
      for (int g = 0; g < 8; g += 2) {
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const int32_t* wd = reinterpret_cast<const int32_t*>(wbuf + r * k + b * 32);
          i0[r] = _mm512_dpbusd_epi32(i0[r], av[g], _mm512_set1_epi32(wd[g]));
          i1[r] = _mm512_dpbusd_epi32(i1[r], av[g + 1], _mm512_set1_epi32(wd[g + 1]));
        }
      }
      const __m512 dav = _mm512_loadu_ps(ad + b * 16);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 scale = _mm512_mul_ps(dav, _mm512_set1_ps(dwb[r * nb + b]));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[r], i1[r])), scale, acc[r]);
      }
    }
    const int t0 = tile * 16;
    const int nt = n_tokens - t0 < 16 ? n_tokens - t0 : 16;
    alignas(64) float tmp[16];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      _mm512_store_ps(tmp, acc[r]);
      for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r] = tmp[t];
    }
  }
}

template <typename Block>
SPECD_AVX512_TARGET void TiledRows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                   const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  constexpr int kRows = 4;
  // Per-thread unpacked rows: (kRows, k) bytes, (kRows, nb) scales and sums.
  thread_local std::vector<int8_t> wbuf_storage;
  thread_local std::vector<float> dwb;
  thread_local std::vector<int32_t> wcorr;
  const size_t need = static_cast<size_t>(kRows * a.nb * 32) + 64;
  if (wbuf_storage.size() < need) wbuf_storage.resize(need);
  if (dwb.size() < static_cast<size_t>(kRows * a.nb)) {
    dwb.resize(kRows * a.nb);
    wcorr.resize(kRows * a.nb);
  }
  int8_t* wbuf = wbuf_storage.data();
  wbuf += (64 - reinterpret_cast<uintptr_t>(wbuf) % 64) % 64;
  int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    TiledRowGroup<kRows, Block>(w + r * row_bytes, row_bytes, a, n_tokens, y + r, ldy, wbuf,
                                dwb.data(), wcorr.data());
  }
  for (; r < n_rows; ++r) {
    TiledRowGroup<1, Block>(w + r * row_bytes, row_bytes, a, n_tokens, y + r, ldy, wbuf,
                            dwb.data(), wcorr.data());
  }
}

SPECD_AVX512_TARGET void TiledRowsQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                     const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  TiledRows<BlockQ8_0>(w, row_bytes, n_rows, a, n_tokens, y, ldy);
}

SPECD_AVX512_TARGET void TiledRowsQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                     const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  TiledRows<BlockQ4_0>(w, row_bytes, n_rows, a, n_tokens, y, ldy);
}

}  // namespace

const QuantKernelTable* QuantKernelsAvx512Vnni() {
  static const QuantKernelTable table = [] {
    QuantKernelTable t;
    t.quantize = QuantizeRowAvx2Fn();
    t.q8_0 = RowsQ8;
    t.q4_0 = RowsQ4;
    t.q8_0_corr_offset = 128;
    t.q4_0_corr_offset = 8;
    t.q8_0_tiled = TiledRowsQ8;
    t.q4_0_tiled = TiledRowsQ4;
    t.tiled_min_tokens = 7;
    return t;
  }();
  return &table;
}

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
const QuantKernelTable* QuantKernelsAvx512Vnni() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
