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

// T tokens (1..4) against one weight row, two blocks per step; two
// accumulators per token alternate so the FMA latency chain stays hidden.
// prefetch_rows > 0: prefetch the row that many rows (of row_bytes) ahead.
template <int T, typename Block>
SPECD_AVX512_TARGET void RowTile(const Block* row, const QuantizedActs& a, int t0, float* y,
                                 int64_t ldy, size_t row_bytes = 0, int prefetch_rows = 0) {
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
  const char* ahead = reinterpret_cast<const char*>(row) + prefetch_rows * row_bytes;
  // Blocks b, b + 1 into acc[t][p]. Called with a constant p from a loop over
  // pairs of steps: with p a loop variable GCC keeps the
  // accumulators on the stack, an FMA from memory and a store per step.
  auto step = [&](int64_t b, int p) SPECD_AVX512_TARGET __attribute__((always_inline)) {
    if (prefetch_rows > 0) _mm_prefetch(ahead + b * sizeof(Block), _MM_HINT_T0);
    __m512i wu = LoadPairU8(row + b);
    // f16 scales of both blocks -> (dw_b, dw_b+1) in lanes 0, 1.
    uint32_t dd = static_cast<uint32_t>(row[b].d) | (static_cast<uint32_t>(row[b + 1].d) << 16);
    __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dd)));
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      __m512i init = _mm512_loadu_si512(ac[t] + b * 8);
      __m512i av = _mm512_loadu_si512(aq[t] + b * 32);
      __m512i idot = _mm512_dpbusd_epi32(init, wu, av);
      // (da_b, da_b+1): one unaligned 8-byte load.
      __m128 da = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ad[t] + b)));
      __m512 s = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(dw, da)));
      acc[t][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot), s, acc[t][p]);
    }
  };
  int64_t b = 0;
  for (; b + 4 <= a.nb; b += 4) {
    step(b, 0);
    step(b + 2, 1);
  }
  if (b + 2 <= a.nb) {
    step(b, 0);
    b += 2;
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
// broadcast against them (one vpdpbusd per 4 elements x 16 tokens). Two i32
// accumulators per row (even / odd groups) keep enough independent vpdpbusd
// chains in flight.
template <int R, typename Block>
SPECD_AVX512_TARGET void TiledRowGroup(const uint8_t* w, size_t row_bytes, const TiledActs& a,
                                       int n_tokens, float* y, int64_t ldy, uint8_t* wbuf,
                                       float* dwb) {
  const int64_t nb = a.nb;
  const int64_t k = nb * 32;
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(wbuf + r * k + b * 32), LoadOneU8(row[b]));
    }
    RowScalesF32(row, nb, dwb + r * nb);
  }
  for (int tile = 0; tile < a.n_tiles; ++tile) {
    const int8_t* aq = a.qs + tile * nb * 512;
    const int32_t* ac = a.corr + tile * nb * 16;
    const float* ad = a.d + tile * nb * 16;
    __m512 acc[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    // Prefetch the next row group (see QuadRowGroup) during the first tile.
    const bool prefetch = tile == 0 && a.prefetch_rows > 0;
    NextGroupPrefetch<R, Block> pf(reinterpret_cast<const char*>(w) + a.prefetch_rows * row_bytes,
                                   row_bytes, nb);
    for (int64_t b = 0; b < nb; ++b) {
      if (prefetch) pf.AtBlock(b);
      __m512i av[8];
      #pragma GCC unroll 16
      for (int g = 0; g < 8; ++g) av[g] = _mm512_loadu_si512(aq + b * 512 + g * 64);
      const __m512i corr = _mm512_loadu_si512(ac + b * 16);
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
          const int32_t* wd = reinterpret_cast<const int32_t*>(wbuf + r * k + b * 32);
          i0[r] = _mm512_dpbusd_epi32(i0[r], _mm512_set1_epi32(wd[g]), av[g]);
          i1[r] = _mm512_dpbusd_epi32(i1[r], _mm512_set1_epi32(wd[g + 1]), av[g + 1]);
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
  thread_local std::vector<uint8_t> wbuf_storage;
  thread_local std::vector<float> dwb;
  const size_t need = static_cast<size_t>(kRows * a.nb * 32) + 64;
  if (wbuf_storage.size() < need) wbuf_storage.resize(need);
  if (dwb.size() < static_cast<size_t>(kRows * a.nb)) dwb.resize(kRows * a.nb);
  uint8_t* wbuf = wbuf_storage.data();
  wbuf += (64 - reinterpret_cast<uintptr_t>(wbuf) % 64) % 64;
  int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    TiledRowGroup<kRows, Block>(w + r * row_bytes, row_bytes, a, n_tokens, y + r, ldy, wbuf,
                                dwb.data());
  }
  for (; r < n_rows; ++r) {
    TiledRowGroup<1, Block>(w + r * row_bytes, row_bytes, a, n_tokens, y + r, ldy, wbuf,
                            dwb.data());
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

// R weight rows against Q quads of tokens (4 Q tokens). Per block: the weight
// half-blocks are unpacked once per row and used for every quad.
template <int R, int Q, typename Block>
SPECD_AVX512_TARGET void QuadRowGroup(const uint8_t* w, size_t row_bytes, const QuadActs& a,
                                      int q0, int n_tokens, float* y, int64_t ldy, float* dwb) {
  const int64_t nb = a.nb;
  (void)dwb;
  const Block* rows[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Block*>(w + r * row_bytes);
  // The f16 scales of R rows x 4 blocks in one gather per 4 blocks, lane
  // 4j + r = row r, block b + j: read with the blocks (a separate pass over
  // the rows' scales before the blocks stalled on memory twice).
  const __m512i gidx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
                         _mm512_set1_epi32(static_cast<int>(row_bytes))),
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                         _mm512_set1_epi32(static_cast<int>(sizeof(Block)))));
  constexpr __mmask16 kRowLanes = R >= 4 ? 0xFFFF : static_cast<__mmask16>(0x1111 * ((1u << R) - 1));
  alignas(64) float dws[16];
  __m512 acc[R][Q];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int q = 0; q < Q; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  const int8_t* aq = a.qs + static_cast<int64_t>(q0) * nb * 128;
  const int32_t* ac = a.corr + static_cast<int64_t>(q0) * nb * 16;
  const float* ad = a.d + static_cast<int64_t>(q0) * nb * 16;
  // Software prefetch of the next row group (a.prefetch_rows ahead) while
  // working on this one: without it a verify pass waited on the weight stream
  // like an unprefetched decode step.
  NextGroupPrefetch<R, Block> pf(reinterpret_cast<const char*>(w) + a.prefetch_rows * row_bytes,
                                 row_bytes, nb);
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 3) == 0) {
      const int64_t left = nb - b;
      const __mmask16 blocks = left >= 4 ? 0xFFFF : static_cast<__mmask16>((1u << (4 * left)) - 1);
      const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), kRowLanes & blocks,
                                                      gidx, &rows[0][b], 1);
      _mm512_store_ps(dws, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
    }
    if (a.prefetch_rows > 0) pf.AtBlock(b);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512i lo, hi;
      LoadHalvesU8(rows[r][b], &lo, &hi);
      const __m512 dw = _mm512_set1_ps(dws[(b & 3) * 4 + r]);
      #pragma GCC unroll 16
      for (int q = 0; q < Q; ++q) {
        const int64_t qb = q * nb + b;
        __m512i i = _mm512_loadu_si512(ac + qb * 16);
        i = _mm512_dpbusd_epi32(i, lo, _mm512_loadu_si512(aq + qb * 128));
        i = _mm512_dpbusd_epi32(i, hi, _mm512_loadu_si512(aq + qb * 128 + 64));
        const __m512 scale = _mm512_mul_ps(_mm512_loadu_ps(ad + qb * 16), dw);
        acc[r][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), scale, acc[r][q]);
      }
    }
  }
  // Lane (t, j) holds token t's partial sum over dword lane j: add the 4 lanes.
  alignas(64) float tmp[16];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int q = 0; q < Q; ++q) {
      __m512 v = acc[r][q];
      v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
      v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
      _mm512_store_ps(tmp, v);
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
// kernel").
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
  // Gather element 4j + r: row r, block b + j.
  const __m512i gidx = _mm512_add_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
                         _mm512_set1_epi32(rb)),
      _mm512_setr_epi32(0, 0, 0, 0, 18, 18, 18, 18, 36, 36, 36, 36, 54, 54, 54, 54));
  // acc[t][parity of the block]: two chains per token hide the FMA latency.
  __m512 acc[T][2];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  // scale[t]: lane j = f16(dw[row j, blk]) * da[t, blk]. The block's weights
  // are unpacked once for all T tokens.
  auto step = [&](int64_t blk, const __m512* scale, int parity) SPECD_AVX512_TARGET {
    const int64_t off = blk * static_cast<int64_t>(sizeof(BlockQ4_0)) + 2;
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + off)));
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + off)), 1);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r2 + off)), 2);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r3 + off)), 3);
    const __m512i lo = _mm512_and_si512(q, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int8_t* aq = g.qs + t * k;
      const int32_t* ac = g.corr + t * nb * 4;
      __m512i i = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ac + blk * 4)));
      i = _mm512_dpbusd_epi32(i, lo, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + blk * 32))));
      i = _mm512_dpbusd_epi32(i, hi, _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + blk * 32 + 16))));
      acc[t][parity] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), scale[t], acc[t][parity]);
    }
  };
  // Software prefetch of the next row group as one sequential stream (see
  // GroupPrefetcher): the hardware prefetcher alone left a decode step well
  // below the machine's read bandwidth (--no-prefetch, docs/performance.md).
  const bool prefetch = g.prefetch_rows > 0;
  GroupPrefetcher pf(reinterpret_cast<const char*>(w) + g.prefetch_rows * row_bytes,
                     4 * static_cast<int64_t>(row_bytes), nb / 4 > 0 ? nb / 4 : 1);
  // Scale lanes of block j: rows 0..3 of block j, each repeated over a lane.
  const __m512i s0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i sj[4] = {s0, _mm512_add_epi32(s0, _mm512_set1_epi32(4)),
                         _mm512_add_epi32(s0, _mm512_set1_epi32(8)),
                         _mm512_add_epi32(s0, _mm512_set1_epi32(12))};
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    if (prefetch) pf.Step();
    const __m512i raw = _mm512_i32gather_epi32(gidx, r0 + b * sizeof(BlockQ4_0), 1);
    const __m512 dw16 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
    // Lane 4j + r: f16(dw[r, b + j]) * da[t, b + j].
    __m512 dw[T];
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      dw[t] = _mm512_mul_ps(
          dw16, _mm512_permutexvar_ps(s0, _mm512_castps128_ps512(_mm_loadu_ps(g.d + t * nb + b))));
    }
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512 sc[T];
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) sc[t] = _mm512_permutexvar_ps(sj[j], dw[t]);
      step(b + j, sc, j & 1);
    }
  }
  for (; b < nb; ++b) {
    const __m128i d4 = _mm_setr_epi16(
        static_cast<short>(reinterpret_cast<const BlockQ4_0*>(r0)[b].d),
        static_cast<short>(reinterpret_cast<const BlockQ4_0*>(r1)[b].d),
        static_cast<short>(reinterpret_cast<const BlockQ4_0*>(r2)[b].d),
        static_cast<short>(reinterpret_cast<const BlockQ4_0*>(r3)[b].d), 0, 0, 0, 0);
    const __m128 dw4 = _mm_cvtph_ps(d4);
    __m512 sc[T];
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m128 dw = _mm_mul_ps(dw4, _mm_set1_ps(g.d[t * nb + b]));
      sc[t] = _mm512_permutexvar_ps(s0, _mm512_castps128_ps512(dw));
    }
    step(b, sc, 0);
  }
  // Lane j = row j: add its 4 dwords.
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    __m512 v = _mm512_add_ps(acc[t][0], acc[t][1]);
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    alignas(64) float tmp[16];
    _mm512_store_ps(tmp, v);
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
