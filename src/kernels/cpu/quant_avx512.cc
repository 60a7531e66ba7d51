// AVX512-VNNI Q8_0 / Q4_0 kernels: two 32-element blocks per 512-bit vector,
// vpdpbusd with the weight as the unsigned operand (see quant_kernels.h for
// the offset correction). Compiled with a function target attribute; chosen at
// run time by the platform probe.
#include <type_traits>
#include <vector>

#include "kernels/cpu/quant_kernels.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/avx512_common.h"

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {


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

// The f32 scales of blocks b0 .. b0 + 15 of a row (lanes past n: 0).
template <typename Block>
SPECD_AVX512_TARGET inline __m512 Scales16(const Block* row, int64_t b0, int n) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(sizeof(Block))));
  const __mmask16 m = n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1);
  const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, &row[b0].d, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

// T tokens (1..4) against one weight row in the summation order of
// quant_kernels.h: per 16 blocks, 8 two-block dot vectors per token reduce to
// the 16 whole-block sums, scaled by f16(dw) * da and folded into the 2
// summation lanes (Fold16).
// prefetch_rows > 0: prefetch the row that many rows (of row_bytes) ahead.
template <int T, typename Block>
SPECD_AVX512_TARGET void RowTile(const Block* row, const QuantizedActs& a, int t0, float* y,
                                 int64_t ldy, size_t row_bytes = 0, int prefetch_rows = 0) {
  const int64_t nb = a.nb;
  __m128 acc[T];
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
  const char* ahead = reinterpret_cast<const char*>(row) + prefetch_rows * row_bytes;
  // Token t's dword partials of blocks b, b + 1 (b + 1 < nb when both).
  auto pair = [&](int64_t b, int t, bool both) SPECD_AVX512_TARGET __attribute__((always_inline)) {
    const int32_t* ac = a.corr + ((t0 + t) * nb + b) * 8;
    const int8_t* aq = a.qs + (t0 + t) * a.k + b * 32;
    if (both) return _mm512_dpbusd_epi32(_mm512_loadu_si512(ac), LoadPairU8(row + b),
                                         _mm512_loadu_si512(aq));
    const __m256i i = _mm256_dpbusd_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ac)), LoadOneU8(row[b]),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq)));
    return _mm512_zextsi256_si512(i);
  };
  int64_t b0 = 0;
  for (; b0 + 16 <= nb; b0 += 16) {
    if (prefetch_rows > 0) {
      #pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) _mm_prefetch(ahead + (b0 + 2 * p) * sizeof(Block), _MM_HINT_T0);
    }
    const __m512 dw = Scales16(row, b0, 16);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512i v[8];
      #pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) v[p] = pair(b0 + 2 * p, t, true);
      const __m512i s = PairSum(PairSum(PairSum(v[0], v[1]), PairSum(v[2], v[3])),
                                PairSum(PairSum(v[4], v[5]), PairSum(v[6], v[7])));
      const __m512 da = _mm512_loadu_ps(a.d + (t0 + t) * nb + b0);
      acc[t] = Fold16(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da), acc[t]);
    }
  }
  if (b0 < nb) {  // the last nb % 16 blocks
    const int n = static_cast<int>(nb - b0);
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    const __m512 dw = Scales16(row, b0, n);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512i v[8];
      for (int p = 0; p < 8; ++p) {
        const int64_t b = b0 + 2 * p;
        v[p] = b < nb ? pair(b, t, b + 1 < nb) : _mm512_setzero_si512();
      }
      const __m512i s = PairSum(PairSum(PairSum(v[0], v[1]), PairSum(v[2], v[3])),
                                PairSum(PairSum(v[4], v[5]), PairSum(v[6], v[7])));
      const __m512 da = _mm512_maskz_loadu_ps(m, a.d + (t0 + t) * nb + b0);
      acc[t] = Fold16(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da), acc[t], n);
    }
  }
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) y[(t0 + t) * ldy] = SumLanes2(acc[t]);
}

template <typename Block>
SPECD_AVX512_TARGET void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                              const QuantizedActs& a, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    int t0 = 0;
    if (a.n_tokens == 1) {
      // Decode streams the weights once: prefetch rows ahead (see GemvQ4Group)
      // or, reading one row at a time, bytes ahead along the row.
      if (a.prefetch_rows == 0 && a.stream_prefetch > 0) {
        RowTile<1>(row, a, 0, y + r, ldy, static_cast<size_t>(a.stream_prefetch), 1);
      } else {
        RowTile<1>(row, a, 0, y + r, ldy, row_bytes, a.prefetch_rows);
      }
      continue;
    }
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

// How the token-lane and quad kernels prefetch their next row group while
// they work on one (`next`: the group's first row; called once per block b).
// Q8_0: one sequential stream over the group (GroupPrefetcher). Q4_0: each
// row at the block being worked on, every 2 blocks; the sequential stream was
// slower there at 8-16 tokens, where the Q4_0 kernels are compute-bound
// (docs/performance.md, "Multi-token kernels from DRAM"). Both take
// (next, row_bytes, blocks per row).
template <int R, typename Block>
class RowwisePrefetch {
 public:
  RowwisePrefetch(const char* next, size_t row_bytes, int64_t /*nb*/)
      : next_(next), row_bytes_(row_bytes) {}
  // Inlined: a call in the block loop would spill every zmm accumulator.
  SPECD_AVX512_TARGET __attribute__((always_inline)) inline void AtBlock(int64_t b) {
    if ((b & 1) != 0) return;
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm_prefetch(next_ + r * row_bytes_ + b * sizeof(Block), _MM_HINT_T0);
  }

 private:
  const char* next_;
  size_t row_bytes_;
};
template <int R, typename Block>
class SequentialPrefetch {
 public:
  SequentialPrefetch(const char* next, size_t row_bytes, int64_t nb)
      : stream_(next, R * static_cast<int64_t>(row_bytes), nb) {}
  __attribute__((always_inline)) inline void AtBlock(int64_t) { stream_.Step(); }

 private:
  GroupPrefetcher stream_;
};
template <int R, typename Block>
using NextGroupPrefetch = std::conditional_t<std::is_same_v<Block, BlockQ8_0>,
                                             SequentialPrefetch<R, Block>, RowwisePrefetch<R, Block>>;

// The f32 scales of blocks [0, nb) of one row: 16 f16 scales per gather (the
// blocks are sizeof(Block) bytes apart; each dword read stays inside a block).
template <typename Block>
SPECD_AVX512_TARGET void RowScalesF32(const Block* row, int64_t nb, float* out) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(sizeof(Block))));
  for (int64_t b = 0; b < nb; b += 16) {
    const int64_t n = nb - b < 16 ? nb - b : 16;
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    const __m512i raw =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, &row[b].d, 1);
    const __m512 f = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
    _mm512_mask_storeu_ps(out + b, m, f);
  }
}

// Token-lane kernel: R weight rows against every 16-token tile. The rows are
// first unpacked once per row group into unsigned bytes and f32 scales; then
// per block the 8 activation vectors are loaded once and each weight dword is
// broadcast against them (one vpdpbusd per 4 elements x 16 tokens); the
// blocks go in their lane order (TiledActs, quant_kernels.h). Two i32
// accumulators per row (even / odd groups) keep enough independent vpdpbusd
// chains in flight.
template <int R, typename Block>
SPECD_AVX512_TARGET void TiledRowGroup(const uint8_t* w, size_t row_bytes, const TiledActs& a,
                                       int n_tokens, float* y, int64_t ldy, uint8_t* wbuf,
                                       float* dwb, float* dw_nat) {
  const int64_t nb = a.nb;
  const int64_t k = nb * 32;
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    // In the blocks' lane order (TiledActs), as the loop below reads them.
    RowScalesF32(row, nb, dw_nat);
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t b = a.order[i];
      _mm256_store_si256(reinterpret_cast<__m256i*>(wbuf + r * k + i * 32), LoadOneU8(row[b]));
      dwb[r * nb + i] = dw_nat[b];
    }
  }
  for (int tile = 0; tile < a.n_tiles; ++tile) {
    const int8_t* aq = a.qs + tile * nb * 512;
    const int32_t* ac = a.corr + tile * nb * 16;
    const float* ad = a.d + tile * nb * 16;
    // Prefetch the next row group (see QuadRowGroup) during the first tile.
    const bool prefetch = tile == 0 && a.prefetch_rows > 0;
    NextGroupPrefetch<R, Block> pf(reinterpret_cast<const char*>(w) + a.prefetch_rows * row_bytes,
                                   row_bytes, nb);
    // Summation lane l (quant_kernels.h): blocks l, l + kSumLanes, ...
    // (positions i in the lane order) into acc, stored to lanes[l] when the
    // pass ends.
    alignas(64) float lanes[kSumLanes][R][16];
    int64_t i = 0;
    for (int l = 0; l < kSumLanes; ++l) {
      __m512 acc[R];
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
      for (int64_t b = l; b < nb; b += kSumLanes, ++i) {
        if (prefetch) pf.AtBlock(b);
        __m512i av[8];
        #pragma GCC unroll 16
        for (int g = 0; g < 8; ++g) av[g] = _mm512_loadu_si512(aq + i * 512 + g * 64);
        const __m512i corr = _mm512_loadu_si512(ac + i * 16);
        __m512i i0[R], i1[R];
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          i0[r] = corr;
          i1[r] = _mm512_setzero_si512();
        }
        #pragma GCC unroll 16
        for (int g = 0; g < 8; g += 2) {
          #pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const int32_t* wd = reinterpret_cast<const int32_t*>(wbuf + r * k + i * 32);
            i0[r] = _mm512_dpbusd_epi32(i0[r], _mm512_set1_epi32(wd[g]), av[g]);
            i1[r] = _mm512_dpbusd_epi32(i1[r], _mm512_set1_epi32(wd[g + 1]), av[g + 1]);
          }
        }
        const __m512 dav = _mm512_loadu_ps(ad + i * 16);
        #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(dwb[r * nb + i]), dav);
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[r], i1[r])), scale, acc[r]);
        }
      }
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) _mm512_store_ps(lanes[l][r], acc[r]);
    }
    const int t0 = tile * 16;
    const int nt = n_tokens - t0 < 16 ? n_tokens - t0 : 16;
    alignas(64) float tmp[16];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      _mm512_store_ps(tmp, SumLaneVectors(&lanes[0][r][0], R * 16));
      for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r] = tmp[t];
    }
  }
}

template <typename Block>
SPECD_AVX512_TARGET void TiledRows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                   const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  constexpr int kRows = 4;
  // Per-thread unpacked rows: (kRows, k) bytes, (kRows, nb) scales and sums.
  thread_local std::vector<uint8_t> wbuf_storage;
  thread_local std::vector<float> dwb;
  thread_local std::vector<float> dw_nat;
  const size_t need = static_cast<size_t>(kRows * a.nb * 32) + 64;
  if (wbuf_storage.size() < need) wbuf_storage.resize(need);
  if (dwb.size() < static_cast<size_t>(kRows * a.nb)) dwb.resize(kRows * a.nb);
  if (dw_nat.size() < static_cast<size_t>(a.nb + 16)) dw_nat.resize(a.nb + 16);
  uint8_t* wbuf = wbuf_storage.data();
  wbuf += (64 - reinterpret_cast<uintptr_t>(wbuf) % 64) % 64;
  int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    TiledRowGroup<kRows, Block>(w + r * row_bytes, row_bytes, a, n_tokens, y + r, ldy, wbuf,
                                dwb.data(), dw_nat.data());
  }
  for (; r < n_rows; ++r) {
    TiledRowGroup<1, Block>(w + r * row_bytes, row_bytes, a, n_tokens, y + r, ldy, wbuf,
                            dwb.data(), dw_nat.data());
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

// Quad kernels (see QuadActs): the unsigned weight bytes of one block as two
// half-block vectors, each 16 bytes broadcast to the four 128-bit lanes.
SPECD_AVX512_TARGET inline void LoadHalvesU8(const BlockQ4_0& blk, __m512i* lo, __m512i* hi) {
  const __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs)));
  const __m512i m = _mm512_set1_epi8(0x0F);
  *lo = _mm512_and_si512(q, m);                         // elements 0..15
  *hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m);   // elements 16..31
}
SPECD_AVX512_TARGET inline void LoadHalvesU8(const BlockQ8_0& blk, __m512i* lo, __m512i* hi) {
  const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
  *lo = _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs))), x80);
  *hi = _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16))), x80);
}

// Four vectors of dword partials (v[j]: 4 lanes of 4 dwords each) -> lane
// 4x + j = the sum of v[j]'s 128-bit lane x. Exact integer adds.
SPECD_AVX512_TARGET inline __m512i InLaneSums4(const __m512i* v) {
  const __m512i x01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i x23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(x01, x23), _mm512_unpackhi_epi64(x01, x23));
}

// Folds lanes (x, j) of f * c, 4 consecutive blocks j < n (the first at an
// even index) of 4 independent outputs x, into the 2 summation lanes (x, 0),
// (x, 1) of acc in block order: blocks j = 0, 1, then 2, 3.
SPECD_AVX512_TARGET inline __m512 FoldQuad(__m512 f, __m512 c, __m512 acc, int n) {
  acc = _mm512_mask3_fmadd_ps(f, c, acc, static_cast<__mmask16>(n >= 2 ? 0x3333 : 0x1111));
  if (n > 2) {
    acc = _mm512_mask3_fmadd_ps(_mm512_permute_ps(f, _MM_SHUFFLE(1, 0, 3, 2)),
                                _mm512_permute_ps(c, _MM_SHUFFLE(1, 0, 3, 2)), acc,
                                static_cast<__mmask16>(n >= 4 ? 0x3333 : 0x1111));
  }
  return acc;
}

// R weight rows against Q quads of tokens (4 Q tokens) in the summation
// order of quant_kernels.h: 4 consecutive blocks b + j side by side, reduced
// in-lane to lane (token, j) and folded into the token's 2 summation lanes
// (FoldQuad); the weight half-blocks are unpacked once per row and block and
// used for every quad.
template <int R, int Q, typename Block>
SPECD_AVX512_TARGET void QuadRowGroup(const uint8_t* w, size_t row_bytes, const QuadActs& a,
                                      int q0, int n_tokens, float* y, int64_t ldy, float* dwb) {
  const int64_t nb = a.nb;
  const int64_t nb4 = (nb + 3) / 4;
  (void)dwb;
  const Block* rows[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w + r * row_bytes);
  // The f16 scales of R rows x 4 blocks in one gather, lane 4r + j = row r,
  // block b + j.
  const __m512i gidx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                         _mm512_set1_epi32(static_cast<int>(row_bytes))),
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
                         _mm512_set1_epi32(static_cast<int>(sizeof(Block)))));
  constexpr __mmask16 kRowLanes = R >= 4 ? 0xFFFF : static_cast<__mmask16>((1u << (4 * R)) - 1);
  const __m512i j4 = _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
  const int8_t* aq = a.qs + static_cast<int64_t>(q0) * nb * 128;
  const int32_t* ac = a.corr + static_cast<int64_t>(q0) * nb * 16;
  const float* ad = a.d + static_cast<int64_t>(q0) * nb4 * 16;
  // Software prefetch of the next row group (a.prefetch_rows ahead) while
  // working on this one: without it a verify pass waited on the weight stream
  // like an unprefetched decode step.
  NextGroupPrefetch<R, Block> pf(reinterpret_cast<const char*>(w) + a.prefetch_rows * row_bytes,
                                 row_bytes, nb);
  __m512 acc[R][Q];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int q = 0; q < Q; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b += 4) {
    const int n = nb - b >= 4 ? 4 : static_cast<int>(nb - b);
    const __mmask16 blocks = n == 4 ? 0xFFFF : static_cast<__mmask16>(((1u << n) - 1) * 0x1111);
    const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), kRowLanes & blocks,
                                                    gidx, &rows[0][b], 1);
    const __m512 dws = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
    if (a.prefetch_rows > 0) {
      for (int j = 0; j < n; ++j) pf.AtBlock(b + j);
    }
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512i v[Q][4];
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        if (j >= n) {
          #pragma GCC unroll 16
          for (int q = 0; q < Q; ++q) v[q][j] = _mm512_setzero_si512();
          continue;
        }
        __m512i lo, hi;
        LoadHalvesU8(rows[r][b + j], &lo, &hi);
        #pragma GCC unroll 16
        for (int q = 0; q < Q; ++q) {
          const int64_t qb = q * nb + b + j;
          __m512i i = _mm512_loadu_si512(ac + qb * 16);
          i = _mm512_dpbusd_epi32(i, lo, _mm512_loadu_si512(aq + qb * 128));
          v[q][j] = _mm512_dpbusd_epi32(i, hi, _mm512_loadu_si512(aq + qb * 128 + 64));
        }
      }
      // Lane (t, j): row r's scale of block b + j.
      const __m512 dw = _mm512_permutexvar_ps(_mm512_add_epi32(j4, _mm512_set1_epi32(4 * r)), dws);
      #pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) {
        const __m512 f = _mm512_cvtepi32_ps(InLaneSums4(v[q]));
        const __m512 sc = _mm512_mul_ps(dw, _mm512_loadu_ps(ad + (q * nb4 + b / 4) * 16));
        acc[r][q] = FoldQuad(f, sc, acc[r][q], n);
      }
    }
  }
  alignas(64) float tmp[16];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int q = 0; q < Q; ++q) {
      _mm512_store_ps(tmp, SumLanesInLane(acc[r][q]));
      const int t0 = (q0 + q) * kQuadTokens;
      for (int t = 0; t < kQuadTokens && t0 + t < n_tokens; ++t) y[(t0 + t) * ldy + r] = tmp[4 * t];
    }
  }
}

template <int Q, typename Block>
SPECD_AVX512_TARGET void QuadRowsQ(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                   const QuadActs& a, int q0, int n_tokens, float* y, int64_t ldy,
                                   float* dwb) {
  constexpr int kRows = 4;
  int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    QuadRowGroup<kRows, Q, Block>(w + r * row_bytes, row_bytes, a, q0, n_tokens, y + r, ldy, dwb);
  }
  for (; r < n_rows; ++r) {
    QuadRowGroup<1, Q, Block>(w + r * row_bytes, row_bytes, a, q0, n_tokens, y + r, ldy, dwb);
  }
}

template <typename Block>
SPECD_AVX512_TARGET void QuadRows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                  const QuadActs& a, int n_tokens, float* y, int64_t ldy) {
  thread_local std::vector<float> dwb;
  if (dwb.size() < static_cast<size_t>(4 * a.nb)) dwb.resize(4 * a.nb);
  int q0 = 0;
  // Two quads per pass: 8 accumulators per quad row group stay in registers.
  for (; q0 + 2 <= a.n_quads; q0 += 2) {
    QuadRowsQ<2, Block>(w, row_bytes, n_rows, a, q0, n_tokens, y, ldy, dwb.data());
  }
  if (q0 < a.n_quads) QuadRowsQ<1, Block>(w, row_bytes, n_rows, a, q0, n_tokens, y, ldy, dwb.data());
}

SPECD_AVX512_TARGET void QuadRowsQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                    const QuadActs& a, int n_tokens, float* y, int64_t ldy) {
  QuadRows<BlockQ8_0>(w, row_bytes, n_rows, a, n_tokens, y, ldy);
}

SPECD_AVX512_TARGET void QuadRowsQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                    const QuadActs& a, int n_tokens, float* y, int64_t ldy) {
  QuadRows<BlockQ4_0>(w, row_bytes, n_rows, a, n_tokens, y, ldy);
}

// One-token Q4_0 kernel (see GemvActs): rows r0..r0+3, one per 128-bit lane,
// so no dword transpose is needed, and the scales of 4 rows x 4 blocks come in
// one gather rather than scalar packing (docs/performance.md, "One-token Q4_0
// kernel"). Summation order of quant_kernels.h: 4 consecutive blocks b + j,
// reduced in-lane to lane (row, j), folded into the row's 2 summation lanes
// (FoldQuad).
template <int T>
SPECD_AVX512_TARGET void GemvQ4Group(const uint8_t* w, size_t row_bytes, const GemvActs& g,
                                     float* y, int64_t ldy) {
  const int64_t nb = g.nb;
  const int64_t k = nb * 32;
  const uint8_t* r0 = w;
  const uint8_t* r1 = w + row_bytes;
  const uint8_t* r2 = w + 2 * row_bytes;
  const uint8_t* r3 = w + 3 * row_bytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const int rb = static_cast<int>(row_bytes);
  // Gather element 4r + j: row r, block b + j.
  const __m512i gidx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                         _mm512_set1_epi32(rb)),
      _mm512_setr_epi32(0, 18, 36, 54, 0, 18, 36, 54, 0, 18, 36, 54, 0, 18, 36, 54));
  // Software prefetch of the next row group as one sequential stream (see
  // GroupPrefetcher): the hardware prefetcher alone left a decode step well
  // below the machine's read bandwidth (--no-prefetch, docs/performance.md).
  const bool prefetch = g.prefetch_rows > 0;
  GroupPrefetcher pf(reinterpret_cast<const char*>(w) + g.prefetch_rows * row_bytes,
                     4 * static_cast<int64_t>(row_bytes), nb / 4 > 0 ? nb / 4 : 1);
  __m512 acc[T];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 4) {
    const int n = nb - b >= 4 ? 4 : static_cast<int>(nb - b);
    const __mmask16 blocks = n == 4 ? 0xFFFF : static_cast<__mmask16>(((1u << n) - 1) * 0x1111);
    if (prefetch) pf.Step();
    const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), blocks, gidx,
                                                    r0 + b * sizeof(BlockQ4_0), 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
    __m512i v[T][4];
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if (j >= n) {
        #pragma GCC unroll 4
        for (int t = 0; t < T; ++t) v[t][j] = _mm512_setzero_si512();
        continue;
      }
      const int64_t off = (b + j) * static_cast<int64_t>(sizeof(BlockQ4_0)) + 2;
      __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + off)));
      q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + off)), 1);
      q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r2 + off)), 2);
      q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r3 + off)), 3);
      const __m512i lo = _mm512_and_si512(q, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = g.qs + t * k + (b + j) * 32;
        const int32_t* ac = g.corr + (t * nb + b + j) * 4;
        __m512i i = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ac)));
        i = _mm512_dpbusd_epi32(i, lo, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq))));
        v[t][j] = _mm512_dpbusd_epi32(i, hi, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + 16))));
      }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      // Lane (r, j): f16(dw[r, b + j]) * da[t, b + j].
      const __m512 da = _mm512_broadcast_f32x4(
          _mm_maskz_loadu_ps(static_cast<__mmask8>((1u << n) - 1), g.d + t * nb + b));
      acc[t] = FoldQuad(_mm512_cvtepi32_ps(InLaneSums4(v[t])), _mm512_mul_ps(dw, da), acc[t], n);
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    alignas(64) float tmp[16];
    _mm512_store_ps(tmp, SumLanesInLane(acc[t]));
    float* yt = y + t * ldy;
    yt[0] = tmp[0];
    yt[1] = tmp[4];
    yt[2] = tmp[8];
    yt[3] = tmp[12];
  }
}

// GemvActs from token 0 of `a`: the lane corrections per block.
SPECD_AVX512_TARGET void BuildGemvActsAvx512(const QuantizedActs& a, std::vector<int32_t>* corr,
                                             GemvActs* out) {
  const int64_t nb = a.nb;
  const int64_t n = static_cast<int64_t>(a.n_tokens) * nb;
  corr->resize(static_cast<size_t>(n * 4));
  for (int64_t b = 0; b < n; ++b) {
    const __m128i c = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.corr + b * 8)),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.corr + b * 8 + 4)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(corr->data() + b * 4), c);
  }
  out->n_tokens = a.n_tokens;
  out->nb = nb;
  out->qs = a.qs;
  out->corr = corr->data();
  out->d = a.d;
  out->prefetch_rows = a.prefetch_rows;
}

template <int T>
SPECD_AVX512_TARGET void GemvQ4Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                    const GemvActs& g, float* y, int64_t ldy) {
  for (int64_t r = 0; r + 4 <= n_rows; r += 4) GemvQ4Group<T>(w + r * row_bytes, row_bytes, g, y + r, ldy);
}

SPECD_AVX512_TARGET void GemvQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                const GemvActs& g, const QuantizedActs& a, float* y,
                                int64_t ldy) {
  switch (g.n_tokens) {
    case 1: GemvQ4Rows<1>(w, row_bytes, n_rows, g, y, ldy); break;
    case 2: GemvQ4Rows<2>(w, row_bytes, n_rows, g, y, ldy); break;
    case 3: GemvQ4Rows<3>(w, row_bytes, n_rows, g, y, ldy); break;
    default: GemvQ4Rows<4>(w, row_bytes, n_rows, g, y, ldy); break;
  }
  const int64_t r = n_rows / 4 * 4;
  if (r < n_rows) Rows<BlockQ4_0>(w + r * row_bytes, row_bytes, n_rows - r, a, y + r, ldy);
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
    t.tiled_min_tokens = 9;
    t.q8_0_quad = QuadRowsQ8;
    t.q4_0_quad = QuadRowsQ4;
    t.quad_min_tokens = 2;
    t.q4_0_gemv = GemvQ4;
    t.build_gemv_acts = BuildGemvActsAvx512;
    t.q4_0_stream = StreamQ4;
    t.build_stream_lanes = BuildStreamLanesAvx512;
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
