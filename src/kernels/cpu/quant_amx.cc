// AMX-INT8 kernels for Q8_0 / Q4_0 matmuls of many tokens (prefill, verify
// passes): the tile unit multiplies 16 weight rows by up to 16 token columns
// (tdpbssd: signed x signed bytes, exact i32 sums), and AVX-512 applies the
// block scales f16(dw) * da in f32.
//
// Two layouts, four C tiles (tmm0-3) keeping several blocks in flight (see
// Issue), A in tmm4-5, B in tmm6-7:
//   16-token tiles (9+ tokens): A = 16 rows x one block (32 bytes), B = the
//     TiledActs block (8 groups of 4 elements x 16 tokens, already the VNNI
//     layout B needs), C = 16 rows x 16 tokens;
//   pair layout (2-8 tokens, PairGroup): A = 16 rows x two blocks (64 bytes),
//     B = 16 x 64 bytes with token t's block b + p in column p * 8 + t.
// Q8_0 rows are read straight from the GGUF blocks (stride = row bytes; the
// pair layout copies two blocks per row side by side); Q4_0 rows are unpacked
// to signed bytes (nibble - 8) into a small buffer first.
//
// Each block's i32 dot is exact and the f32 block terms are added in the
// summation order of quant_kernels.h (the blocks lane by lane, one store of
// the accumulators per lane pass), so results equal the one-token kernels'
// bit for bit.
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_tile_config.h"
#include "kernels/cpu/quant_kernels.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/cpu/avx512_common.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_AMX_TARGET                                                                    \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma," \
                        "f16c")))

constexpr int kAmxRows = 16;
static_assert(kSumLanes == 2, "pair layout: C column halves are the even and odd summation lanes");

AmxTileConfig MakeConfig() {
  AmxTileConfig c;
  for (int i = 0; i < 4; ++i) c.Tile(i, 16, 64);  // C: 16 x 16 i32
  for (int i = 0; i < 2; ++i) {
    c.Tile(4 + i, 16, 32);  // A: 16 rows x one block
    c.Tile(6 + i, 8, 64);   // B: 8 groups x 16 tokens x 4 bytes
  }
  return c;
}

// The compiler does not see tileloadd read memory: order the buffer writes
// before it.
inline void CompilerBarrier() { __asm__ volatile("" ::: "memory"); }

// The f32 scales of block b of 16 rows (row stride row_bytes): one gather of
// the dword at each row's block start (f16 d + 2 quant bytes, inside the row).
template <typename Block>
SPECD_AMX_TARGET inline void BlockScales(const uint8_t* w, __m512i row_offsets, int64_t b,
                                         float* out) {
  const __m512i raw = _mm512_i32gather_epi32(row_offsets, w + b * sizeof(Block), 1);
  _mm512_store_ps(out, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
}

// Four 16-byte Q4_0 quant groups in the lanes of q -> signed bytes (nibble -
// 8) in element order: [lo 0 | hi 0 | lo 1 | hi 1] to dst0 and [lo 2 | hi 2 |
// lo 3 | hi 3] to dst1 (64 bytes each, 64-aligned).
SPECD_AMX_TARGET inline void SplitNibbles(__m512i q, int8_t* dst0, int8_t* dst1) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i eight = _mm512_set1_epi8(8);
  const __m512i idx0 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i idx1 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(q, m4), eight);
  const __m512i hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4), eight);
  _mm512_store_si512(dst0, _mm512_permutex2var_epi64(lo, idx0, hi));
  _mm512_store_si512(dst1, _mm512_permutex2var_epi64(lo, idx1, hi));
}

// Block b of Q4_0 rows r0..r0+15 -> 16 rows x 32 signed bytes (nibble - 8)
// in element order, 64-aligned.
SPECD_AMX_TARGET inline void UnpackQ4Block(const uint8_t* w, size_t row_bytes, int64_t b,
                                           int8_t* dst) {
  #pragma GCC unroll 4
  for (int r = 0; r < kAmxRows; r += 4) {
    const uint8_t* p = w + r * row_bytes + b * sizeof(BlockQ4_0) + 2;
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + row_bytes)), 1);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * row_bytes)), 2);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * row_bytes)), 3);
    SplitNibbles(q, dst + r * 32, dst + r * 32 + 64);
  }
}

// Block b goes to C tile b % 4 (tmm0-3), its A and B tiles alternate
// (tmm4/5, tmm6/7): three blocks are in flight in the tile unit while the
// vector unit scales the fourth, which hides the tdpbssd -> tilestored ->
// reload latency.
template <int kC>
SPECD_AMX_TARGET inline void Issue(const int8_t* a, int64_t a_stride, const int8_t* b) {
  if constexpr (kC == 0) {
    _tile_zero(0);
    _tile_loadd(4, a, a_stride);
    _tile_loadd(6, b, 64);
    _tile_dpbssd(0, 4, 6);
  } else if constexpr (kC == 1) {
    _tile_zero(1);
    _tile_loadd(5, a, a_stride);
    _tile_loadd(7, b, 64);
    _tile_dpbssd(1, 5, 7);
  } else if constexpr (kC == 2) {
    _tile_zero(2);
    _tile_loadd(4, a, a_stride);
    _tile_loadd(6, b, 64);
    _tile_dpbssd(2, 4, 6);
  } else {
    _tile_zero(3);
    _tile_loadd(5, a, a_stride);
    _tile_loadd(7, b, 64);
    _tile_dpbssd(3, 5, 7);
  }
}

template <int kC>
SPECD_AMX_TARGET inline void Store(int32_t* buf) {
  if constexpr (kC == 0) {
    _tile_stored(0, buf, 64);
  } else if constexpr (kC == 1) {
    _tile_stored(1, buf, 64);
  } else if constexpr (kC == 2) {
    _tile_stored(2, buf, 64);
  } else {
    _tile_stored(3, buf, 64);
  }
}

// Issue / Store for C tile i % 4 (the tile number must be a literal).
SPECD_AMX_TARGET inline void IssueSlot(int64_t i, const int8_t* a, int64_t a_stride,
                                       const int8_t* b) {
  switch (i & 3) {
    case 0: Issue<0>(a, a_stride, b); break;
    case 1: Issue<1>(a, a_stride, b); break;
    case 2: Issue<2>(a, a_stride, b); break;
    default: Issue<3>(a, a_stride, b); break;
  }
}

SPECD_AMX_TARGET inline void StoreSlot(int64_t i, int32_t* buf) {
  switch (i & 3) {
    case 0: Store<0>(buf); break;
    case 1: Store<1>(buf); break;
    case 2: Store<2>(buf); break;
    default: Store<3>(buf); break;
  }
}

// acc[r] (lane t: token t) += C[r] * dw[r] * da[t] for one block.
SPECD_AMX_TARGET inline void Scale(const int32_t* buf, const float* dw, const float* da,
                                   __m512* acc) {
  const __m512 dav = _mm512_loadu_ps(da);
  #pragma GCC unroll 16
  for (int r = 0; r < kAmxRows; ++r) {
    const __m512 f = _mm512_cvtepi32_ps(_mm512_load_si512(buf + r * 16));
    acc[r] = _mm512_fmadd_ps(f, _mm512_mul_ps(dav, _mm512_set1_ps(dw[r])), acc[r]);
  }
}

struct AmxScratch {
  std::vector<int8_t> a_store;
  std::vector<float> dw_store;
  std::vector<int32_t> c_store;
  int8_t* a = nullptr;    // unpacked Q4_0 blocks: (slots, 16 rows, 32)
  float* dw = nullptr;    // (slots, 16 rows) f32 scales
  int32_t* c = nullptr;   // 4 x (16 x 16) i32 tile results
  std::vector<float> lanes_store;
  std::vector<int32_t> pos_store;
  float* lanes = nullptr;  // (kSumLanes, 16 rows, 16 columns) summation lanes
  int32_t* pos = nullptr;  // (slots): the lane-order position of each block
  template <typename T>
  static T* Aligned(std::vector<T>* v, size_t n) {
    if (v->size() < n + 64) v->resize(n + 64);
    uintptr_t p = reinterpret_cast<uintptr_t>(v->data());
    return v->data() + ((64 - p % 64) % 64) / sizeof(T);
  }
  void Reserve(int64_t slots) {
    a = Aligned(&a_store, static_cast<size_t>(slots * kAmxRows * 32));
    dw = Aligned(&dw_store, static_cast<size_t>(slots * kAmxRows));  // 64-aligned per 16
    c = Aligned(&c_store, 1024);
    lanes = Aligned(&lanes_store, kSumLanes * kAmxRows * 16);
    if (pos_store.size() < static_cast<size_t>(slots)) pos_store.resize(slots);
    pos = pos_store.data();
  }

};

AmxScratch& Scratch() {
  thread_local AmxScratch s;
  return s;
}

// One 16-row group (wg, row stride row_bytes) against every token tile.
//
// One tile (a verify pass): a single streaming pass over the rows; block b is
// unpacked / its scales gathered right before it is issued, into slot b % 4.
// Several tiles (prefill): the whole group is unpacked and its scales
// gathered first (slot b), then every tile reuses them from cache. Either
// way, the next group's rows are prefetched while the first tile runs.
template <typename Block>
SPECD_AMX_TARGET void Group(const uint8_t* wg, size_t row_bytes, const TiledActs& acts,
                            int n_tokens, float* y, int64_t ldy, AmxScratch& s,
                            bool prefetch_next) {
  constexpr bool kQ4 = sizeof(Block) == sizeof(BlockQ4_0);
  const int64_t nb = acts.nb;
  const bool stream = acts.n_tiles == 1;
  const int32_t* order = acts.order;
  const __m512i row_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(row_bytes)));
  // Block b's unpacked rows and scales go to slot `slot`.
  auto prepare = [&](int64_t b, int64_t slot) SPECD_AMX_TARGET {
    BlockScales<Block>(wg, row_offsets, b, s.dw + slot * kAmxRows);
    if constexpr (kQ4) UnpackQ4Block(wg, row_bytes, b, s.a + slot * kAmxRows * 32);
  };
  // The block at position i of the lane order (TiledActs) goes to slot i % 4
  // when streaming, else to slot i.
  auto slot_of = [&](int64_t i) { return stream ? (i & 3) : i; };
  if (!stream) {
    // The rows front to back (block b to its lane-order position), so the
    // weights stream from memory in address order.
    for (int64_t i = 0; i < nb; ++i) s.pos[order[i]] = static_cast<int32_t>(i);
    for (int64_t b = 0; b < nb; ++b) prepare(b, s.pos[b]);
  }
  CompilerBarrier();
  const uint8_t* next = wg + kAmxRows * row_bytes;
  for (int tile = 0; tile < acts.n_tiles; ++tile) {
    const int8_t* bq = acts.qs + tile * nb * 512;
    const float* ad = acts.d + tile * nb * 16;
    const bool prefetch = prefetch_next && tile == 0;
    // Summation lanes (quant_kernels.h): the blocks go in the lane order l,
    // l + kSumLanes, ... for each lane l; acc holds lane l's pass and is
    // stored to s.lanes[l] (16 rows x 16 tokens) when it ends. Lanes without
    // blocks stay 0.
    __m512 acc[kAmxRows];
    #pragma GCC unroll 16
    for (int r = 0; r < kAmxRows; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t l = nb; l < kSumLanes; ++l) {
      #pragma GCC unroll 16
      for (int r = 0; r < kAmxRows; ++r) _mm512_store_ps(s.lanes + (l * kAmxRows + r) * 16, acc[r]);
    }
    auto issue = [&](int64_t i) SPECD_AMX_TARGET {
      const int64_t b = order[i];
      if (prefetch) {
        #pragma GCC unroll 16
        for (int r = 0; r < kAmxRows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(next + r * row_bytes + b * sizeof(Block)),
                       _MM_HINT_T0);
        }
      }
      if (stream) {
        prepare(b, i & 3);
        CompilerBarrier();
      }
      const int8_t* a;
      int64_t a_stride;
      if constexpr (kQ4) {
        a = s.a + slot_of(i) * kAmxRows * 32;
        a_stride = 32;
      } else {
        a = reinterpret_cast<const int8_t*>(wg + b * sizeof(BlockQ8_0) + 2);
        a_stride = static_cast<int64_t>(row_bytes);
      }
      IssueSlot(i, a, a_stride, bq + i * 512);
    };
    constexpr int64_t kLead = 3;
    for (int64_t i = 0; i < kLead && i < nb; ++i) issue(i);
    for (int64_t i = 0; i < nb; ++i) {
      // Order position i + 3 reuses position i - 1's C tile and slot, both done with.
      if (i + kLead < nb) issue(i + kLead);
      const int64_t b = order[i];
      int32_t* buf = s.c + (i & 3) * 256;
      StoreSlot(i, buf);
      Scale(buf, s.dw + slot_of(i) * kAmxRows, ad + i * 16, acc);
      if (b + kSumLanes >= nb) {  // the last block of lane b % kSumLanes
        float* lane = s.lanes + (b % kSumLanes) * kAmxRows * 16;
        #pragma GCC unroll 16
        for (int r = 0; r < kAmxRows; ++r) {
          _mm512_store_ps(lane + r * 16, acc[r]);
          acc[r] = _mm512_setzero_ps();
        }
      }
    }
    const int t0 = tile * 16;
    const int nt = n_tokens - t0 < 16 ? n_tokens - t0 : 16;
    // Row r's lane vectors (lane t: token t) through the order's tree, then
    // transposed through memory.
    alignas(64) float tmp[kAmxRows * 16];
    #pragma GCC unroll 16
    for (int r = 0; r < kAmxRows; ++r) {
      _mm512_store_ps(tmp + r * 16, SumLaneVectors(s.lanes + r * 16, kAmxRows * 16));
    }
    for (int t = 0; t < nt; ++t) {
      float* yt = y + (t0 + t) * ldy;
      for (int r = 0; r < kAmxRows; ++r) yt[r] = tmp[r * 16 + t];
    }
  }
}

template <typename Block>
SPECD_AMX_TARGET void AmxRows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                              const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  static const AmxTileConfig config = MakeConfig();
  const int64_t groups = n_rows / kAmxRows;
  if (groups > 0) {
    AmxScratch& s = Scratch();
    s.Reserve(a.n_tiles == 1 ? 4 : a.nb);
    _tile_loadconfig(&config);
    for (int64_t g = 0; g < groups; ++g) {
      Group<Block>(w + g * kAmxRows * row_bytes, row_bytes, a, n_tokens, y + g * kAmxRows, ldy,
                   s, a.prefetch_rows > 0 && g + 1 < groups);
    }
    _tile_release();
  }
  // Rows past the last full group: the AVX512-VNNI token-lane kernel.
  const int64_t done = groups * kAmxRows;
  if (done < n_rows) {
    const QuantKernelTable* v = QuantKernelsAvx512Vnni();
    QuantTiledRowsFn rest = sizeof(Block) == sizeof(BlockQ4_0) ? v->q4_0_tiled : v->q8_0_tiled;
    rest(w + done * row_bytes, row_bytes, n_rows - done, a, n_tokens, y + done, ldy);
  }
}

SPECD_AMX_TARGET void AmxRowsQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  AmxRows<BlockQ8_0>(w, row_bytes, n_rows, a, n_tokens, y, ldy);
}

SPECD_AMX_TARGET void AmxRowsQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                const TiledActs& a, int n_tokens, float* y, int64_t ldy) {
  AmxRows<BlockQ4_0>(w, row_bytes, n_rows, a, n_tokens, y, ldy);
}

// ---------------------------------------------------------------- pair mode
// Up to 8 tokens (verify passes): tdpbssd costs the same for K = 32 and 64,
// so one instruction takes two blocks. A row = [block b | block b + 1] (64
// bytes); B column c = p * 8 + t is token t's block b + p, its rows 8p..8p+7
// hold that block's 8 groups and the other 8 rows are zero. A C row then
// holds both blocks' dots for 8 tokens, scaled in one pass: per 2 blocks one
// tdpbssd, one tilestored and 4 vector uops per row, where the 16-token layout
// pays that per block.

AmxTileConfig MakePairConfig() {
  AmxTileConfig c;
  // C 16 x 16 i32; A 16 rows x 2 blocks; B 16 x (16 columns x 4 bytes).
  for (int i = 0; i < 8; ++i) c.Tile(i, 16, 64);
  return c;
}

// Blocks b, b + 1 (if has_b1, else zeros) of Q4_0 rows 0..15 -> 16 rows x 64
// signed bytes (nibble - 8), 64-aligned.
SPECD_AMX_TARGET inline void UnpackQ4Pair(const uint8_t* w, size_t row_bytes, int64_t b,
                                          bool has_b1, int8_t* dst) {
  #pragma GCC unroll 8
  for (int r = 0; r < kAmxRows; r += 2) {
    const uint8_t* p = w + r * row_bytes + b * sizeof(BlockQ4_0) + 2;
    // Lanes: [row r blk b, row r blk b+1, row r+1 blk b, row r+1 blk b+1].
    __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + row_bytes)), 2);
    if (has_b1) {
      q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + sizeof(BlockQ4_0))), 1);
      q = _mm512_inserti32x4(
          q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + row_bytes + sizeof(BlockQ4_0))), 3);
    }
    SplitNibbles(q, dst + r * 64, dst + (r + 1) * 64);
  }
}

// Blocks b, b + 1 (if has_b1, else zeros) of Q8_0 rows 0..15 -> 16 x 64 bytes.
SPECD_AMX_TARGET inline void PackQ8Pair(const uint8_t* w, size_t row_bytes, int64_t b, bool has_b1,
                                        int8_t* dst) {
  #pragma GCC unroll 16
  for (int r = 0; r < kAmxRows; ++r) {
    const uint8_t* p = w + r * row_bytes + b * sizeof(BlockQ8_0) + 2;
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q1 = has_b1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + sizeof(BlockQ8_0)))
                              : _mm256_setzero_si256();
    _mm512_store_si512(dst + r * 64, _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1));
  }
}

template <typename Block>
SPECD_AMX_TARGET void PairGroup(const uint8_t* wg, size_t row_bytes, const PairActs& acts,
                                int n_tokens, float* y, int64_t ldy, AmxScratch& s,
                                bool prefetch_next) {
  constexpr bool kQ4 = sizeof(Block) == sizeof(BlockQ4_0);
  const int64_t nb = acts.nb;
  const int64_t np = (nb + 1) / 2;
  const __m512i row_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const uint8_t* next = wg + kAmxRows * row_bytes;
  // Pair q -> slot q % 4: A (16 x 64 bytes), scales (2 x 16 f32).
  auto issue = [&](int64_t q) SPECD_AMX_TARGET {
    const int64_t b = 2 * q;
    const bool has_b1 = b + 1 < nb;
    if (prefetch_next) {
      #pragma GCC unroll 16
      for (int r = 0; r < kAmxRows; ++r) {
        const char* p = reinterpret_cast<const char*>(next + r * row_bytes + b * sizeof(Block));
        _mm_prefetch(p, _MM_HINT_T0);
        if constexpr (!kQ4) _mm_prefetch(p + 64, _MM_HINT_T0);
      }
    }
    const int64_t slot = q & 3;
    int8_t* a = s.a + slot * kAmxRows * 64;
    float* dw = s.dw + slot * 2 * kAmxRows;
    BlockScales<Block>(wg, row_offsets, b, dw);
    if (has_b1) {
      BlockScales<Block>(wg, row_offsets, b + 1, dw + kAmxRows);
    } else {
      _mm512_store_ps(dw + kAmxRows, _mm512_setzero_ps());
    }
    if constexpr (kQ4) {
      UnpackQ4Pair(wg, row_bytes, b, has_b1, a);
    } else {
      PackQ8Pair(wg, row_bytes, b, has_b1, a);
    }
    CompilerBarrier();
    IssueSlot(q, a, 64, acts.qs + q * 1024);
  };
  // Summation order (quant_kernels.h): C columns p * 8 + t hold token t's
  // block 2q + p, so column half p accumulates summation lane p (even, odd
  // blocks) in block order.
  __m512 acc[kAmxRows];
  #pragma GCC unroll 16
  for (int r = 0; r < kAmxRows; ++r) acc[r] = _mm512_setzero_ps();
  constexpr int64_t kLead = 3;
  for (int64_t q = 0; q < kLead && q < np; ++q) issue(q);
  for (int64_t q = 0; q < np; ++q) {
    if (q + kLead < np) issue(q + kLead);
    int32_t* buf = s.c + (q & 3) * 256;
    StoreSlot(q, buf);
    const float* dw = s.dw + (q & 3) * 2 * kAmxRows;
    const __m512 dav = _mm512_loadu_ps(acts.d + q * 16);
    // A missing last block (odd nb) leaves lane 1 untouched.
    const __mmask16 cols = 2 * q + 1 < nb ? 0xFFFF : 0x00FF;
    #pragma GCC unroll 16
    for (int r = 0; r < kAmxRows; ++r) {
      const __m512 sc = _mm512_mul_ps(
          _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(dw[r]), _mm512_set1_ps(dw[kAmxRows + r])), dav);
      acc[r] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(buf + r * 16)), sc, acc[r],
                                     cols);
    }
  }
  // lane 0 + lane 1: columns t and 8 + t.
  alignas(64) float tmp[kAmxRows * 16];
  #pragma GCC unroll 16
  for (int r = 0; r < kAmxRows; ++r) _mm512_store_ps(tmp + r * 16, acc[r]);
  for (int t = 0; t < n_tokens; ++t) {
    float* yt = y + t * ldy;
    for (int r = 0; r < kAmxRows; ++r) yt[r] = tmp[r * 16 + t] + tmp[r * 16 + 8 + t];
  }
}

template <typename Block>
SPECD_AMX_TARGET void AmxPairRows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                  const PairActs& a, const QuantizedActs& acts, float* y,
                                  int64_t ldy) {
  static const AmxTileConfig config = MakePairConfig();
  const int64_t groups = n_rows / kAmxRows;
  if (groups > 0) {
    AmxScratch& s = Scratch();
    s.Reserve(8);  // 4 slots of 16 x 64 bytes and 2 x 16 scales; lanes
    _tile_loadconfig(&config);
    for (int64_t g = 0; g < groups; ++g) {
      PairGroup<Block>(w + g * kAmxRows * row_bytes, row_bytes, a, acts.n_tokens,
                       y + g * kAmxRows, ldy, s, acts.prefetch_rows > 0 && g + 1 < groups);
    }
    _tile_release();
  }
  // Rows past the last full group: the AVX512-VNNI row kernel.
  const int64_t done = groups * kAmxRows;
  if (done < n_rows) {
    const QuantKernelTable* v = QuantKernelsAvx512Vnni();
    QuantRowsFn rest = sizeof(Block) == sizeof(BlockQ4_0) ? v->q4_0 : v->q8_0;
    rest(w + done * row_bytes, row_bytes, n_rows - done, acts, y + done, ldy);
  }
}

SPECD_AMX_TARGET void AmxPairRowsQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                    const PairActs& a, const QuantizedActs& acts, float* y,
                                    int64_t ldy) {
  AmxPairRows<BlockQ8_0>(w, row_bytes, n_rows, a, acts, y, ldy);
}

SPECD_AMX_TARGET void AmxPairRowsQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                    const PairActs& a, const QuantizedActs& acts, float* y,
                                    int64_t ldy) {
  AmxPairRows<BlockQ4_0>(w, row_bytes, n_rows, a, acts, y, ldy);
}

}  // namespace

// B tiles for pair mode (see PairGroup), tokens [0, a.n_tokens <= 8).
void BuildPairActs(const QuantizedActs& a, std::vector<int8_t>* qs, std::vector<float>* d,
                   PairActs* out) {
  const int64_t nb = a.nb;
  const int64_t np = (nb + 1) / 2;
  qs->assign(static_cast<size_t>(np * 1024), 0);
  d->assign(static_cast<size_t>(np * 16), 0.f);
  for (int t = 0; t < a.n_tokens && t < kPairTokens; ++t) {
    const int8_t* src = a.qs + t * a.k;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t q = b / 2, p = b % 2;
      const int col = static_cast<int>(p) * 8 + t;
      int8_t* dst = qs->data() + q * 1024;
      for (int g = 0; g < 8; ++g) std::memcpy(dst + (p * 8 + g) * 64 + col * 4, src + b * 32 + 4 * g, 4);
      (*d)[q * 16 + col] = a.d[t * nb + b];
    }
  }
  out->nb = nb;
  out->qs = qs->data();
  out->d = d->data();
}

const AmxKernelTable* AmxKernels() {
  static const AmxKernelTable table = [] {
    AmxKernelTable t;
    t.q8_0 = AmxRowsQ8;
    t.q4_0 = AmxRowsQ4;
    t.q8_0_pair = AmxPairRowsQ8;
    t.q4_0_pair = AmxPairRowsQ4;
    t.row_align = kAmxRows;
    // Break-even against the AVX512-VNNI quad / token-lane kernels
    // (specd generate --verify-cost 1,2,4,8,16 with SPECD_AMX=0 vs on, 1B
    // shapes, 1 thread): a Q4_0 block costs an unpack the Q8_0 one does not,
    // so the VNNI quad kernel keeps Q4_0 at 2-4 tokens.
    t.q8_0_pair_min_tokens = 2;
    t.q4_0_pair_min_tokens = 5;
    t.q8_0_min_tokens = 4;
    t.q4_0_min_tokens = 9;
    return t;
  }();
  return &table;
}

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
const AmxKernelTable* AmxKernels() { return nullptr; }
void BuildPairActs(const QuantizedActs&, std::vector<int8_t>*, std::vector<float>*, PairActs*) {}
}  // namespace specd::kernels::cpu

#endif
