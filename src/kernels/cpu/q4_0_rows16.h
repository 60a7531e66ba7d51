// Q4_0 weights repacked at load for the AVX512-VNNI path: 16 rows
// interleaved, so one vpdpbusd advances the dot products of 16 rows with one
// broadcast activation dword, and a block's 16 integer sums land in 16 lanes
// with no horizontal reduction. Internal to the kernels module.
//
// Layout (same bytes as the GGUF rows it replaces): a matrix of R rows
// (R % 16 == 0) and K columns (nb = K / 32 blocks) is R / 16 groups of
// nb * 288 bytes, group g holding rows 16g .. 16g + 15:
//   [0, 32 nb)           block b's 16 f16 scales at 32 b, row order;
//   [32 nb, 288 nb)      block b's quants at 32 nb + 256 b: 4 chunks c of 64
//                        bytes; dword r of chunk c is bytes 4c .. 4c + 3 of
//                        row r's block b (low nibbles: elements 4c .. 4c + 3,
//                        high nibbles: elements 16 + 4c .. 16 + 4c + 3).
// A group is one sequential stream, so a thread's weight traffic is one stream
// at any token count.
//
// Summation order: that of quant_kernels.h (exact per-block integer sums,
// c_b = f16(dw_b) * da_b, two lanes by block parity, y = lane0 + lane1), so a
// repacked matrix gives bitwise the outputs of the GGUF rows on every path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant_kernels.h"

namespace specd::kernels::cpu {

constexpr int kRows16 = 16;
constexpr size_t kRows16BlockBytes = 16 * 18;  // one block of 16 rows

// Bytes of one group of 16 rows of nb blocks.
inline size_t Rows16GroupBytes(int64_t nb) { return static_cast<size_t>(nb) * kRows16BlockBytes; }

// Rewrites rows [0, rows) of GGUF Q4_0 data (row stride nb * 18 bytes) in the
// layout above, in place. REQUIRES: rows % 16 == 0.
void RepackQ4_0Rows16(uint8_t* data, int64_t rows, int64_t nb);

// y[t * ldy + r] for rows r < n_groups * 16 of the repacked `w` and tokens
// t < a.n_tokens. csum (a.n_tokens, nb): the sum of a's 8 correction lanes of
// each block, -8 * sum of the block's activations (a.corr with offset 8).
// a.prefetch_rows > 0: prefetch ahead in the group stream in software.
using Rows16Fn = void (*)(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                          const int32_t* csum, float* y, int64_t ldy);
// Portable kernel (any CPU); the AVX512-VNNI one (null off x86).
void Rows16Q4Scalar(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                    const int32_t* csum, float* y, int64_t ldy);
Rows16Fn Rows16Q4Avx512();

}  // namespace specd::kernels::cpu
