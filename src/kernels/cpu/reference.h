// Scalar reference for every op in kernels/ops.h: plain loops, f64
// accumulation, the obvious code. The fast kernels are tested against these
// functions; same contracts and shapes as ops.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "tensor/tensor_view.h"

namespace specd::kernels::ref {

// Exact f32 math on dequantized weights: y = x · Wᵀ with f64 accumulation
// (activations are NOT quantized, so the Q8_0/Q4_0 fast paths differ from this
// by their activation-quantization error; the Q4_BF16 (W4A16) paths, whose
// weights dequantize exactly and whose activations stay f32, by f32 rounding
// only).
void MatMul(const TensorView& w, const float* x, int n_tokens, float* y);
void MatMulRows(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int n_tokens, float* y);

// Activation quantization used by the Q8_0/Q4_0 matmuls, per block of 32:
//   d = amax / 127 (f32), id = 1 / d (0 when d == 0), q[i] = round_half_even(x[i] * id)
// x: (n) with n % 32 == 0; qs: (n); d: (n / 32).
void QuantizeActivationsQ8(const float* x, int64_t n, int8_t* qs, float* d);

// The quantized matmul's exact math: activations quantized as above, the
// integer block dot sum_i wq[i] * aq[i] (wq = qs for Q8_0, nibble - 8 for
// Q4_0) computed exactly, then y = sum_b f16(dw_b) * da_b * idot_b in f64.
// REQUIRES: w.dtype is kQ8_0 or kQ4_0.
void MatMulQuantizedActs(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                         int n_tokens, float* y);

// The same exact integer block dots in the Q8_0/Q4_0 kernels' summation order
// (cpu/quant_kernels.h), written out: c_b = f16(dw_b) * da_b in f32, lane
// b % 2 += float(idot_b) * c_b with one rounding (fma), in block order, then
// lane 0 + lane 1. Every quantized kernel path must equal this bit for bit.
// REQUIRES: w.dtype is kQ8_0 or kQ4_0.
void MatMulQuantizedActsInOrder(const TensorView& w, int64_t row_begin, int64_t row_end,
                                const float* x, int n_tokens, float* y);

void RmsNorm(const float* x, const float* w, int n_tokens, int dim, float eps, float* out);
void Rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
          const float* inv_freq, bool interleaved);
void SwiGLU(const float* gate, const float* up, int64_t n, float* out);
void Softmax(float* x, int64_t n);
int64_t Argmax(const float* x, int64_t n);
void Attention(const float* q, int n_q, int n_ctx, const KvPages& kv, const uint8_t* mask,
               int n_heads, int n_kv_heads, int head_dim, float* out);

}  // namespace specd::kernels::ref
