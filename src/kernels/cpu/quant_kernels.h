// Integer dot-product kernels for Q8_0 / Q4_0 weights, one table per ISA
// (scalar, AVX2, AVX-VNNI, AVX512-VNNI). Internal to the kernels module.
//
// The activations are quantized once per MatMul call (QuantizedActs), then
// every weight block is multiplied with integer dot products and the block
// result is scaled by f16(dw) * da in f32.
//
// Summation order: every kernel below (every ISA path, token count, tile
// layout and decode layout) computes output (row r, token t) over nb blocks as
//   s_b  = the exact integer dot of block b (|s_b| < 2^24, so float(s_b) is exact),
//   c_b  = f16(dw_b) * da_b (one f32 multiply),
//   lane[l], l < kSumLanes = 2 (even and odd blocks), starts at +0 and takes
//          lane[l] = fma(float(s_b), c_b, lane[l]) for b = l, l + 2, l + 4, ... < nb
//          in increasing order (a lane without blocks stays +0),
//   y    = SumLanes(lane) = lane[0] + lane[1].
// So a token's outputs are bitwise the same alone (decode), in a batch of any
// size at any offset (prefill) or in a verify pass, and the same on every
// path (ref::MatMulQuantizedActsInOrder spells the order out). The one-token
// kernels reduce 16 blocks to whole-block sums and fold them into the two
// lanes (8 chained 2-lane FMAs); kernels whose vectors hold 4 consecutive
// blocks (quad, 4-row) reduce each block's dword partials in-lane and fold
// pairs of blocks; the AMX pair layout holds the two lanes in its two column
// halves; kernels whose vector lanes are tokens (16-token, AMX tiles) walk the
// even blocks, then the odd ones, storing the accumulators between the two
// passes. Two lanes keep those kernels' weight reads nearly in address order
// (16 lanes, i.e. 16 strided passes, cost the AMX kernels ~25-30%).
//
// The x86 paths use vpdpbusd / vpmaddubsw, which multiply an UNSIGNED byte by
// a SIGNED byte. The weight is the unsigned operand:
//   Q4_0: the raw nibble n = w + 8 (0..15), so sum(n * a) = sum(w * a) + 8 * sum(a);
//   Q8_0 (AVX512): w ^ 0x80 = w + 128 (0..255), so the excess is 128 * sum(a);
//   Q8_0 (AVX2, AVX-VNNI): |w| times sign(w) * a, as llama.cpp does (no excess;
//                          keeps vpmaddubsw's i16 pair sums below 2 * 127 * 127).
// The excess is cancelled by starting each block's i32 accumulator at `corr`,
// which the quantizer precomputes per activation block: corr[l] is
// -offset * (a[4l] + a[4l+1] + a[4l+2] + a[4l+3]) for dword lane l (8 lanes per
// block), the lanes vpdpbusd sums into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "platform/cpu_features.h"

namespace specd::kernels::cpu {

constexpr int kSumLanes = 2;
inline float SumLanes(const float* lane) { return lane[0] + lane[1]; }

// n_tokens rows of k activations, quantized per block of 32 (see
// ref::QuantizeActivationsQ8 for the exact rounding).
struct QuantizedActs {
  int n_tokens = 0;
  int64_t k = 0;
  int64_t nb = 0;          // k / 32
  const int8_t* qs = nullptr;     // (n_tokens, k)
  const float* d = nullptr;       // (n_tokens, nb)
  const int32_t* corr = nullptr;  // (n_tokens, nb, 8); null when corr_offset == 0
  // The kernels prefetch the weight rows this many rows ahead (0: off).
  int prefetch_rows = 0;
  // One-token row kernels when prefetch_rows == 0 (stream decode): prefetch
  // this many bytes ahead along the row (0: off; see read_calibration.h).
  int stream_prefetch = 0;
};

// The lane order of n blocks: lane l = 0, 1, ... in turn, each lane's blocks
// l, l + lanes, l + 2 * lanes, ... < n in increasing order; order[i] is the
// block at position i. TiledActs stores its blocks in this order, so the
// kernels that walk the blocks lane by lane read them front to back.
inline void LaneOrder(int64_t n, int lanes, std::vector<int32_t>* order) {
  order->clear();
  for (int64_t l = 0; l < lanes; ++l) {
    for (int64_t i = l; i < n; i += lanes) order->push_back(static_cast<int32_t>(i));
  }
}

// Quantizes one row: x (k) -> qs (k), d (k/32) and, when corr_offset != 0,
// corr (k/32, 8). REQUIRES: k % 32 == 0.
using QuantizeRowFn = void (*)(const float* x, int64_t k, int corr_offset, int8_t* qs, float* d,
                               int32_t* corr);
// y[t * ldy + i] = sum_j W[i, j] * act[t, j] for rows i < n_rows of `w` (row
// stride row_bytes, GGUF blocks) and every token t < a.n_tokens.
using QuantRowsFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                             const QuantizedActs& a, float* y, int64_t ldy);

// Token-lane layout for multi-token matmuls (prefill, long verify passes):
// tokens are grouped in tiles of kTileTokens, and each 512-bit vector holds
// the same 4 consecutive (signed) activations of all 16 tokens. The kernel
// unpacks a weight row once into unsigned bytes (as the row kernels see them)
// and broadcasts each weight dword against the activation vector, so one
// vpdpbusd advances 16 token dot products; corr (from QuantizedActs.corr)
// cancels the weight offset. Padding tokens in the last tile have a = 0,
// corr = 0 and d = 0.
constexpr int kTileTokens = 16;
// Blocks are stored in LaneOrder(nb, kSumLanes): position i of a tile holds
// block order[i].
struct TiledActs {
  int n_tiles = 0;
  int64_t nb = 0;
  const int8_t* qs = nullptr;     // (n_tiles, nb positions, 8 groups, 16 tokens, 4)
  const int32_t* corr = nullptr;  // (n_tiles, nb positions, 16): -offset * sum of the token's block
  const float* d = nullptr;       // (n_tiles, nb positions, 16)
  const int32_t* order = nullptr;  // (nb): LaneOrder(nb, kSumLanes)
  // The kernel prefetches the rows this many rows ahead while it works on a
  // row group (0: off), as QuantizedActs::prefetch_rows.
  int prefetch_rows = 0;
};
// Rearranges tokens [t0, t0 + n_tiles * 16) of `a` (tokens past a.n_tokens are
// padding; a.corr must be set) into the tiled layout. Storage is sized by the
// callee.
void BuildTiledActs(const QuantizedActs& a, int t0, int n_tiles, std::vector<int8_t>* qs,
                    std::vector<int32_t>* corr, std::vector<float>* d,
                    std::vector<int32_t>* order, TiledActs* out);
using QuantTiledRowsFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                  const TiledActs& a, int n_tokens, float* y, int64_t ldy);

// Quad layout for matmuls of a few tokens (verify passes of 2-8 tokens): each
// 512-bit vector holds the same 16 consecutive activations of 4 tokens, so one
// vpdpbusd with a weight half-block broadcast to all four 128-bit lanes
// advances 4 token dot products, and the per-block f32 scaling is done once
// per 4 tokens instead of once per token. The weights are the unsigned operand
// (as in the row kernels) and corr cancels their offset. Padding tokens in
// the last quad have a = 0, corr = 0 and d = 0.
constexpr int kQuadTokens = 4;
struct QuadActs {
  int n_quads = 0;
  int64_t nb = 0;
  // (n_quads, nb, 2 halves, 4 tokens, 16): half h holds block elements
  // 16h .. 16h + 15 of each token.
  const int8_t* qs = nullptr;
  // (n_quads, nb, 4 tokens, 4): dword lane j of token t sums activation
  // groups j (half 0) and j + 4 (half 1), so its correction is
  // corr[t][j] + corr[t][j + 4] of QuantizedActs.
  const int32_t* corr = nullptr;
  // (n_quads, ceil(nb / 4), 4 tokens, 4): lane 4t + j of group g is d[t] of
  // block 4g + j (0 past nb).
  const float* d = nullptr;
  int prefetch_rows = 0;     // as TiledActs::prefetch_rows
};
// Rearranges tokens [t0, a.n_tokens) of `a` into quads (a.corr must be set).
void BuildQuadActs(const QuantizedActs& a, int t0, std::vector<int8_t>* qs,
                   std::vector<int32_t>* corr, std::vector<float>* d, QuadActs* out);
// y[t * ldy + i] for i < n_rows and t < n_tokens (<= n_quads * 4).
using QuantQuadRowsFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                 const QuadActs& a, int n_tokens, float* y, int64_t ldy);

// Layout for the one-token Q4_0 kernel (decode), which works on 4 weight rows
// per vector: 128-bit lane j holds the 16 quant bytes of block b of row j, the
// block's activation halves (elements 0-15, 16-31) are broadcast to all four
// lanes, so one vpdpbusd per half advances 4 rows and lane j's 4 dwords are
// partial sums of row j; the per-block f32 scaling is paid once per 4 rows.
// The scales of 4 rows x 4 blocks come in one gather.
// Up to kGemvMaxTokens tokens share each unpacked weight vector (small verify
// passes), which beats the quad kernel at 2-4 tokens (docs/performance.md,
// Sapphire Rapids section).
constexpr int kGemvMaxTokens = 4;
struct GemvActs {
  int n_tokens = 1;               // 1..kGemvMaxTokens
  int64_t nb = 0;
  const int8_t* qs = nullptr;     // (n_tokens, nb, 32): QuantizedActs.qs
  const int32_t* corr = nullptr;  // (n_tokens, nb, 4): dword i is corr[i] + corr[i + 4]
  const float* d = nullptr;       // (n_tokens, nb): QuantizedActs.d
  int prefetch_rows = 0;          // as QuantizedActs::prefetch_rows (0 or 4)
  // Row-stream kernel only (StreamQ4): (n_tokens, nb / 4, 2 halves, 4 blocks,
  // 16): per group of 4 blocks the elements 0-15 of each block, then 16-31, so
  // 128-bit lane j of a 64-byte load pairs with block 4g + j of one weight row.
  // Blocks past the last multiple of 4 are read from `qs`.
  const int8_t* qs_lanes = nullptr;
  // Row-stream kernel only: prefetch this many bytes ahead along the row (0: off).
  int stream_prefetch = 0;
};
// The corrections of every token of `a` (a.corr must be set); storage sized
// by the callee.
using BuildGemvActsFn = void (*)(const QuantizedActs& a, std::vector<int32_t>* corr,
                                 GemvActs* out);
// y[t * ldy + i] for i < n_rows, t < g.n_tokens (rows past the last multiple
// of 4 go through the row kernel with `a`).
using QuantGemvFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                             const GemvActs& g, const QuantizedActs& a, float* y, int64_t ldy);

struct QuantKernelTable {
  QuantizeRowFn quantize = nullptr;
  QuantRowsFn q8_0 = nullptr;
  QuantRowsFn q4_0 = nullptr;
  int q8_0_corr_offset = 0;  // 0 or 128
  int q4_0_corr_offset = 0;  // 0 or 8
  // Token-lane kernels (null when the path has none) and the smallest token
  // count for which they beat the row kernels above.
  QuantTiledRowsFn q8_0_tiled = nullptr;
  QuantTiledRowsFn q4_0_tiled = nullptr;
  int tiled_min_tokens = 0;
  // Quad kernels (null when the path has none), used for token counts from
  // quad_min_tokens up to the tiled threshold (and for a tiled run's rest).
  QuantQuadRowsFn q8_0_quad = nullptr;
  QuantQuadRowsFn q4_0_quad = nullptr;
  int quad_min_tokens = 0;
  // One-token Q4_0 kernel and its activation layout (null when the path has none).
  QuantGemvFn q4_0_gemv = nullptr;
  BuildGemvActsFn build_gemv_acts = nullptr;
  // Row-stream Q4_0 kernel for the same token counts (null when the path has
  // none): reads one weight row at a time, so a thread's weight traffic is one
  // sequential stream; needs GemvActs::qs_lanes from build_stream_lanes.
  QuantGemvFn q4_0_stream = nullptr;
  void (*build_stream_lanes)(const QuantizedActs& a, std::vector<int8_t>* qs,
                             GemvActs* out) = nullptr;
};

// AMX-INT8 tile kernels (quant_amx.cc) over the TiledActs layout, for matmuls
// of many tokens. The caller must hold the OS permission for tile data
// (platform::RequestAmxTileData) and the CPU must have AMX-TILE, AMX-INT8 and
// AVX512-VNNI; rows past a multiple of row_align go to the AVX512-VNNI
// token-lane kernel.
// Pair layout for the AMX kernels at up to kPairTokens tokens (verify): per
// block pair q (blocks 2q, 2q + 1), a 16 x 64-byte B tile whose column
// c = p * 8 + t is token t's block 2q + p in rows 8p..8p+7 (other rows zero),
// and the 16 scales d[q][c]. Padding columns and a missing last block are 0.
constexpr int kPairTokens = 8;
struct PairActs {
  int64_t nb = 0;
  const int8_t* qs = nullptr;  // (ceil(nb / 2), 16, 64)
  const float* d = nullptr;    // (ceil(nb / 2), 16)
};
void BuildPairActs(const QuantizedActs& a, std::vector<int8_t>* qs, std::vector<float>* d,
                   PairActs* out);
// y[t * ldy + i] for i < n_rows, t < acts.n_tokens (<= kPairTokens); rows past
// a multiple of 16 go to the AVX512-VNNI row kernel with `acts`.
using QuantPairRowsFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                 const PairActs& a, const QuantizedActs& acts, float* y,
                                 int64_t ldy);

struct AmxKernelTable {
  QuantTiledRowsFn q8_0 = nullptr;
  QuantTiledRowsFn q4_0 = nullptr;
  // Up to kPairTokens tokens (pair layout).
  QuantPairRowsFn q8_0_pair = nullptr;
  QuantPairRowsFn q4_0_pair = nullptr;
  int row_align = 16;  // split rows across threads in multiples of this
  // Token counts from which the tile kernels beat the AVX512-VNNI ones: the
  // pair layout up to kPairTokens, the 16-token layout above (set with their
  // measurements in quant_amx.cc).
  int q8_0_pair_min_tokens = 0;
  int q4_0_pair_min_tokens = 0;
  int q8_0_min_tokens = 0;
  int q4_0_min_tokens = 0;
};
// Null when this build has no AMX path (non-x86).
const AmxKernelTable* AmxKernels();

// The table for `isa`, or null when this build has no such path (non-x86).
const QuantKernelTable* GetQuantKernels(QuantDotIsa isa);

// The AVX512-VNNI row-stream kernel (quant_stream_avx512.cc; x86 only).
void StreamQ4(const uint8_t* w, size_t row_bytes, int64_t n_rows, const GemvActs& g,
              const QuantizedActs& a, float* y, int64_t ldy);
void BuildStreamLanesAvx512(const QuantizedActs& a, std::vector<int8_t>* qs, GemvActs* out);

const QuantKernelTable* QuantKernelsScalar();
const QuantKernelTable* QuantKernelsAvx2();
const QuantKernelTable* QuantKernelsAvxVnni();
const QuantKernelTable* QuantKernelsAvx512Vnni();
// The AVX2 activation quantizer (null off x86), shared by the wider paths.
QuantizeRowFn QuantizeRowAvx2Fn();

}  // namespace specd::kernels::cpu
