// CPU ops used by the forward pass. Each op has a plain scalar reference in
// kernels/cpu/reference.h and a dispatched fast version here; tests compare
// the two (tolerances stated in the tests).
//
// Conventions: activations are f32, row-major, one row per token.
// A linear weight W is (out, in) in any weight dtype; y = x · Wᵀ.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"
#include "tensor/tensor_view.h"

namespace specd::kernels {

// y[t, o] = sum_i x[t, i] * W[o, i]   for t < n_tokens, o < W.rows()
// x: (n_tokens, W.cols()), y: (n_tokens, W.rows()). `pool` may be null (1 thread).
// Q8_0/Q4_0 weights quantize x to 8 bits per block of 32 (as llama.cpp does)
// so the inner loop is an integer dot product. Q4_BF16 weights (W4A16) keep x
// in f32: the result is within f32 rounding of x times the dequantized
// weights, and batch-invariant in every mode. So do the other ggml block
// types (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS): their outputs are
// bitwise those of the F32 matmul of the exactly dequantized weights.
void MatMul(const TensorView& w, const float* x, int n_tokens, float* y, ThreadPool* pool);

// Same, restricted to output rows [row_begin, row_end) of W (for vocab-parallel
// or draft LM heads); y is (n_tokens, row_end - row_begin).
void MatMulRows(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int n_tokens, float* y, ThreadPool* pool);

// Whether RepackForMatMul would repack `w` now: 2-D, rows a multiple of 16,
// row layout, and Q4_0 / Q8_0 (columns a multiple of 32) or BF16 (even
// columns, the AVX512-BF16 path active), per RepackEnabled()'s rules.
bool WantsRepackForMatMul(const TensorView& w);
// Rewrites `w`'s bytes (which `data` must point to, writable) into the layout
// its matmul kernels read fastest and sets w->layout; false (nothing changed)
// when !WantsRepackForMatMul(*w). MatMul gives bitwise the same outputs
// either way; after it only MatMul / MatMulRows may read the bytes (row
// ranges off multiples of 16 compute the groups that cover them).
bool RepackForMatMul(TensorView* w, uint8_t* data);

// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w      x, out: (n_tokens, dim); may alias.
void RmsNorm(const float* x, const float* w, int n_tokens, int dim, float eps, float* out);

// In-place RoPE on x: (n_tokens, n_heads, head_dim), position pos[t] per token.
// `inv_freq` has head_dim/2 entries (rope_theta and llama3 scaling folded in).
// interleaved=false pairs (i, i+head_dim/2) (HF rotate_half); true pairs (2i, 2i+1).
void Rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
          const float* inv_freq, bool interleaved);
// Rope in two halves, so that a forward pass computes each token's cos / sin
// once for all its layers: angles (n_tokens, head_dim) holds cos(pos[t] *
// inv_freq[i]) at [t][i] and sin at [t][head_dim / 2 + i] (angle in f64);
// RopeWithAngles rotates by them (the outputs of Rope bit for bit).
void RopeAngles(const int32_t* pos, int n_tokens, const float* inv_freq, int head_dim,
                std::vector<float>* angles);
void RopeWithAngles(float* x, int n_tokens, int n_heads, int head_dim, const float* angles,
                    bool interleaved);

// out = silu(gate) * up, elementwise over n values. out may alias gate.
void SwiGLU(const float* gate, const float* up, int64_t n, float* out);

// Numerically stable in-place softmax over n values.
void Softmax(float* x, int64_t n);
// Index of the largest value (the first one on ties).
int64_t Argmax(const float* x, int64_t n);
// log Σ exp(x_i), stable (shifted by the maximum; the sum in double); -inf
// for n = 0, the maximum itself when it is +inf or NaN.
float LogSumExp(const float* x, int64_t n);

// Attention over a paged KV cache for one sequence.
//
// The sequence's cache holds n_ctx positions (slots 0..n_ctx-1): K and V for
// slot s live at k_pages[s / page_size] + (s % page_size) * kv_stride, each
// (n_kv_heads, head_dim) f32, kv_stride = n_kv_heads * head_dim.
// The n_q query tokens occupy the last n_q slots (n_ctx - n_q .. n_ctx-1);
// their K/V are already written there. Query t sees every slot below
// n_ctx - n_q, and among the last n_q slots:
//   mask == nullptr: slots up to and including its own (causal);
//   mask != nullptr: slot n_ctx - n_q + j iff mask[t * n_q + j] != 0 (tree).
// q: (n_q, n_heads, head_dim); out: (n_q, n_heads, head_dim).
// GQA: query head h reads KV head h / (n_heads / n_kv_heads).
// Scale is 1/sqrt(head_dim).
struct KvPages {
  float* const* k_pages;
  float* const* v_pages;
  int page_size;
};
void Attention(const float* q, int n_q, int n_ctx, const KvPages& kv, const uint8_t* mask,
               int n_heads, int n_kv_heads, int head_dim, float* out, ThreadPool* pool);

}  // namespace specd::kernels
