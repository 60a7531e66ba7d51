// Rotary position embedding on the device, the kernels/ops.h Rope contract
// plus YaRN's attention factor.
//
// x: (n_tokens, n_heads, head_dim) f32, rotated in place. Token t's pair i
// (i < head_dim / 2) turns by angle pos[t] * inv_freq[i], computed and passed
// through cos/sin in f64 (as the CPU does: at long context pos * inv_freq
// reaches 1e5 rad, where an f32 angle is off by ~1e-2 rad), then
//   c = f32(cos) * attention_factor, s = f32(sin) * attention_factor,
//   (a, b) <- (a c - b s, a s + b c).
// interleaved == false pairs (i, i + head_dim / 2) (NeoX / HF rotate_half);
// true pairs (2i, 2i + 1) (GPT-J, DeepSeek's interleaved GGUF layout).
//
// Scaling: rope_theta, "llama3", "linear" and YaRN's frequency ramp are in
// inv_freq (model/rope.h RopeInvFreq computes it on the host; upload it once).
// attention_factor is transformers' YaRN attention_factor (model/rope.h
// RopeAttentionFactor), 1 without YaRN. The CPU MLA path leaves cos/sin
// unscaled and multiplies the rotated query by attention_factor² instead
// (the same q·k); a backend mirroring it passes 1 here and folds the square
// into its query scale.
//
// One thread per (token, head, pair), grid-stride. A tuned version would
// compute each token's cos/sin once into shared memory (f64 sincos is slow on
// GPUs with few f64 units) or fuse RoPE into the QKV GEMV epilogue.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace specd::cuda {

// Device: x (n_tokens, n_heads, head_dim) f32; pos (n_tokens) int32;
// inv_freq (head_dim / 2) f32.
// REQUIRES: n_tokens >= 0, n_heads > 0, head_dim > 0 and even,
// attention_factor finite. Violations, and null pointers when n_tokens > 0,
// return kInvalidArgument before any CUDA call. n_tokens == 0 does nothing.
Status RopeF32(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
               const float* inv_freq, bool interleaved, float attention_factor);

}  // namespace specd::cuda
