// Q4_0 / Q8_0 weights repacked at load for the AVX512-VNNI path: 16 rows
// interleaved, so one vpdpbusd advances the dot products of 16 rows with one
// broadcast activation dword, and a block's 16 integer sums land in 16 lanes
// with no horizontal reduction. Internal to the kernels module.
//
// Layout (same bytes as the GGUF rows it replaces): a matrix of R rows
// (R % 16 == 0) and K columns (nb = K / 32 blocks) is R / 16 groups of
// 16 * nb * block bytes (18 for Q4_0, 34 for Q8_0), group g holding rows
// 16g .. 16g + 15:
//   [0, 32 nb)       block b's 16 f16 scales at 32 b, row order;
//   then             block b's quants, Q at a time (Q = 256 bytes for Q4_0,
//                    512 for Q8_0): chunks c of 64 bytes whose dword r is
//                    bytes 4c .. 4c + 3 of row r's block b. Q8_0 (8 chunks):
//                    elements 4c .. 4c + 3. Q4_0 (4 chunks): low nibbles
//                    elements 4c .. 4c + 3, high nibbles 16 + 4c .. 16 + 4c + 3.
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
#include "tensor/dtype.h"

namespace specd::kernels::cpu {

constexpr int kRows16 = 16;

// Bytes of one group of 16 rows of nb blocks (dtype Q4_0 or Q8_0).
inline size_t Rows16GroupBytes(DType dtype, int64_t nb) {
  return static_cast<size_t>(nb) * kRows16 * DTypeBlockBytes(dtype);
}
// The weight offset the kernels' activation corrections cancel (quant_kernels.h).
inline int Rows16CorrOffset(DType dtype) { return dtype == DType::kQ8_0 ? 128 : 8; }

// Rewrites rows [0, rows) of GGUF Q4_0 / Q8_0 data in the layout above, in
// place. REQUIRES: rows % 16 == 0.
void RepackRows16(DType dtype, uint8_t* data, int64_t rows, int64_t nb);

// y[t * ldy + r] for rows r < n_groups * 16 of the repacked `w` and tokens
// t < a.n_tokens. csum (a.n_tokens, nb): the sum of a's 8 correction lanes of
// each block, -Rows16CorrOffset * the block's activation sum.
// a.prefetch_rows > 0: prefetch ahead in the group stream in software.
using Rows16Fn = void (*)(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                          const int32_t* csum, float* y, int64_t ldy);
// Portable kernels (any CPU), and the AVX512-VNNI ones (null off x86).
void Rows16Q4Scalar(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                    const int32_t* csum, float* y, int64_t ldy);
void Rows16Q8Scalar(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                    const int32_t* csum, float* y, int64_t ldy);
Rows16Fn Rows16Avx512(DType dtype);

}  // namespace specd::kernels::cpu
