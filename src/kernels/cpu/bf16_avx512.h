// BF16 matmul with AVX512-BF16 vdpbf16ps. Internal to the kernels module.
// The activations are rounded to bf16 (nearest even) once per call, as
// llama.cpp does for its bf16 vec_dot; products accumulate in f32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specd::kernels::cpu {

// True when this build has the path (x86-64); the caller checks the CPU.
bool HaveBf16Avx512();
// out[i] = bf16(x[i]) for i < n, zero for n <= i < n_padded.
void ConvertToBF16Avx512(const float* x, int64_t n, int64_t n_padded, uint16_t* out);
// y[t * ldy + i] = sum_j W[i, j] * xb[t * ldx + j] for i < n_rows, t < n_tokens.
// w: bf16 rows of k elements, stride row_bytes; xb: bf16 activations, ldx >= k.
void MatRowsBF16Avx512(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                       const uint16_t* xb, int64_t ldx, int n_tokens, float* y, int64_t ldy);

}  // namespace specd::kernels::cpu
