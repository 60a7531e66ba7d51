// Float kernels written once with Highway and compiled for every x86 target
// (SSE4, AVX2, AVX3) plus a portable baseline; each call dispatches to the
// best target the CPU supports (hwy::SupportedTargets(), which the platform
// probe may cap). Internal to the kernels module; ops.h has the contracts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace specd::kernels::cpu {

// y[t * ldy + i] = sum_j W[i, j] * x[t * k + j] for i < n_rows, t < n_tokens.
// w: n_rows rows of k elements (f32, f16 or bf16), row stride row_bytes.
// How a one-token call (decode) reads the weights; the results do not depend
// on it. stream: one row at a time front to back (each thread's weight
// traffic is one sequential stream; rows of k >= 4096 go 8 at a time in short
// chunks, see float_ops.cc), prefetching stream_prefetch bytes ahead along the
// row when > 0. Otherwise 4 rows side by side, prefetching the rows
// prefetch_rows further down when > 0.
struct DecodeReads {
  bool stream = true;
  int stream_prefetch = 0;
  int prefetch_rows = 0;
};
void MatRowsF32(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                int n_tokens, float* y, int64_t ldy, const DecodeReads& reads);
void MatRowsF16(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                int n_tokens, float* y, int64_t ldy, const DecodeReads& reads);
void MatRowsBF16(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                 int n_tokens, float* y, int64_t ldy, const DecodeReads& reads);

void RmsNormF(const float* x, const float* w, int n_tokens, int dim, float eps, float* out);
// Rotates by precomputed angles (kernels::RopeAngles's table).
void RopeRotateF(float* x, int n_tokens, int n_heads, int head_dim, const float* angles,
                 bool interleaved);
void SwiGLUF(const float* gate, const float* up, int64_t n, float* out);
void SoftmaxF(float* x, int64_t n);
int64_t ArgmaxF(const float* x, int64_t n);
float LogSumExpF(const float* x, int64_t n);

// Attention (contract in ops.h) for work items begin, begin + step, ... < end
// of AttentionItemCount(args): item = kv_head * row_blocks + block, where a
// block is up to kAttentionRows consecutive query rows t * group + (h mod
// group) of that KV head.
inline constexpr int kAttentionRows = 16;
struct AttentionArgs {
  const float* q;
  int n_q;
  int n_ctx;
  KvPages kv;
  const uint8_t* mask;
  int n_heads;
  int n_kv_heads;
  int head_dim;
  float* out;
};
void AttentionItems(const AttentionArgs& args, int64_t begin, int64_t end, int64_t step);
inline int64_t AttentionItemCount(const AttentionArgs& a) {
  const int64_t rows = static_cast<int64_t>(a.n_q) * (a.n_heads / a.n_kv_heads);
  return a.n_kv_heads * ((rows + kAttentionRows - 1) / kAttentionRows);
}

// Name of the Highway target the float ops dispatch to now ("AVX3", ...).
const char* FloatOpsTargetName();

}  // namespace specd::kernels::cpu
