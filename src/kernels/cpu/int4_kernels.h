// Q4_BF16 matmul kernels (compressed-tensors INT4 weights, group 32, bf16
// scales; tensor/dtype.h) with f32 activations: W4A16, the activations are
// never quantized. Internal to the kernels module; ops.h has the contract.
//
// Every path dequantizes a weight exactly (w = d * (q - 8) is exact in f32)
// and accumulates w * x in f32 in ONE fixed order per (row, token), the same
// for every token count, row split and decode layout, so each path is
// batch-invariant by construction (in either mode of BatchInvariantEnabled()):
//   scalar:  one f32 sum per output, elements in order;
//   AVX2:    two 8-lane accumulators, block by block: lo += w[0:8] x[0:8],
//            lo += w[8:16] x[8:16], hi += w[16:24] x[16:24], hi += w[24:32] x[24:32];
//            y = horizontal sum of (lo + hi);
//   AVX-512: two 16-lane accumulators, block by block: lo += w[0:16] x[0:16],
//            hi += w[16:32] x[16:32]; y = ReduceAdd512(lo + hi).
// The results differ from an f64 dot of the dequantized weights by f32
// rounding only (ref::MatMul).
//
// Decode (one token) reads each weight byte once, 4 rows side by side: the
// unpacking makes it bound by the vector ports rather than by memory
// (int4_avx512.cc), so the independent chains of 4 rows pay; the decode
// layout flag (SetStreamDecode) does not apply. Prefill unpacks a weight
// block once for up to 8 tokens (AVX-512; 4 on AVX2), with the activations of
// a k chunk in L1 while a group of 16 rows passes over them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/cpu_features.h"

namespace specd::kernels::cpu {

// y[t * ldy + i] = sum_j W[i, j] * x[t * k + j] for i < n_rows, t < n_tokens.
// w: n_rows rows of k / 32 BlockQ4_BF16, row stride row_bytes. k % 32 == 0.
using Int4RowsFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                            const float* x, int n_tokens, float* y, int64_t ldy);

void Int4RowsScalar(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                    const float* x, int n_tokens, float* y, int64_t ldy);
// Null off x86-64.
Int4RowsFn Int4RowsAvx2();
Int4RowsFn Int4RowsAvx512();

// The kernel for a quantized-dot ISA path: kAvx512Vnni -> AVX-512 (it needs
// only AVX512F/BW, which that path implies), kAvx2 / kAvxVnni -> AVX2,
// kScalar -> scalar.
Int4RowsFn Int4Rows(QuantDotIsa isa);

}  // namespace specd::kernels::cpu
