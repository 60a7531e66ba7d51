// Matmul kernels for the ggml block types that have no integer kernel
// (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS; tensor/ggml_blocks.h), with
// f32 activations. Internal to the kernels module; ops.h has the contract.
//
// Weight rows are dequantized exactly (DequantizeRow's values, bit for bit,
// whichever dequantizer runs) into a thread-local f32 scratch of a few rows,
// and the scratch goes through the F32 row kernel (MatRowsF32), whose sum per
// (row, token) is in one order for every token count, row split and row
// grouping (float_ops.cc). So a token's outputs are bitwise the same alone or
// in a batch of any size (batch invariance in every mode), and equal the F32
// matmul of the dequantized matrix bit for bit.
//
// Dequantizing costs a few operations per weight and is paid once per row
// for all the tokens of a call; decode (one token) pays it for every weight,
// which the AVX2 dequantizers keep below the memory stream on the common
// types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/float_ops.h"
#include "platform/cpu_features.h"
#include "tensor/dtype.h"

namespace specd::kernels::cpu {

// Dequantizes n elements (whole blocks) from src to dst; the values of
// DequantizeRow bit for bit.
using DequantRowFn = void (*)(const uint8_t* src, float* dst, int64_t n);

// Whether MatMul takes `t` through these kernels.
bool IsDequantMatMulType(DType t);

// The portable dequantizer of t (DequantizeRow). REQUIRES: IsDequantMatMulType(t).
DequantRowFn DequantRowPortable(DType t);
// The AVX2 dequantizer of t; null where there is none (or off x86-64).
DequantRowFn DequantRowAvx2(DType t);
// The dequantizer for a quantized-dot ISA path: AVX2 where one exists and the
// path implies AVX2 (kAvx2, kAvxVnni, kAvx512Vnni), else the portable one.
DequantRowFn DequantRowFor(DType t, QuantDotIsa isa);

// y[t * ldy + i] = sum_j W[i, j] * x[t * k + j] for i < n_rows, t < n_tokens.
// w: n_rows rows of k elements in blocks, row stride row_bytes; dequant
// decodes one row. reads: how MatRowsF32 walks the dequantized rows (the
// results do not depend on it).
void DequantMatRows(DequantRowFn dequant, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                    int64_t k, const float* x, int n_tokens, float* y, int64_t ldy,
                    const DecodeReads& reads);

}  // namespace specd::kernels::cpu
