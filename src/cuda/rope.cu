// RoPE (rope.h): one thread per rotated pair, so every element is read and
// written by exactly one thread and the rotation can be in place.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/rope.h"

namespace specd::cuda {
namespace {

constexpr int kRopeThreads = 256;
constexpr int64_t kRopeMaxBlocks = 1 << 16;  // grid-stride beyond this

// x: (n_tokens, n_heads, head_dim); n_pairs = n_tokens * n_heads * head_dim / 2.
__global__ void RopeF32Kernel(float* x, int64_t n_pairs, int n_heads, int head_dim,
                              const int32_t* pos, const float* inv_freq, bool interleaved,
                              float attention_factor) {
  const int half = head_dim / 2;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n_pairs;
       p += stride) {
    const int i = static_cast<int>(p % half);
    const int64_t token_head = p / half;  // t * n_heads + h
    const int64_t t = token_head / n_heads;
    double s, c;
    sincos(static_cast<double>(pos[t]) * static_cast<double>(inv_freq[i]), &s, &c);
    const float cf = static_cast<float>(c) * attention_factor;
    const float sf = static_cast<float>(s) * attention_factor;
    float* v = x + token_head * head_dim;
    const int i0 = interleaved ? 2 * i : i;
    const int i1 = interleaved ? 2 * i + 1 : i + half;
    const float a = v[i0], b = v[i1];
    v[i0] = a * cf - b * sf;
    v[i1] = a * sf + b * cf;
  }
}

}  // namespace

Status RopeF32(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
               const float* inv_freq, bool interleaved, float attention_factor) {
  if (n_tokens < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      !std::isfinite(attention_factor)) {
    return InvalidArgumentError("RopeF32: n_tokens " + std::to_string(n_tokens) + ", n_heads " +
                                std::to_string(n_heads) + ", head_dim " + std::to_string(head_dim) +
                                ", attention_factor " + std::to_string(attention_factor) +
                                " (need n_tokens >= 0, n_heads > 0, head_dim > 0 and even, "
                                "a finite attention_factor)");
  }
  if (n_tokens == 0) return Status::Ok();
  if (x == nullptr || pos == nullptr || inv_freq == nullptr) {
    return InvalidArgumentError("RopeF32: null device pointer (x, pos or inv_freq)");
  }
  const int64_t n_pairs = static_cast<int64_t>(n_tokens) * n_heads * (head_dim / 2);
  const int64_t blocks =
      std::min<int64_t>((n_pairs + kRopeThreads - 1) / kRopeThreads, kRopeMaxBlocks);
  RopeF32Kernel<<<static_cast<unsigned>(blocks), kRopeThreads>>>(
      x, n_pairs, n_heads, head_dim, pos, inv_freq, interleaved, attention_factor);
  return CudaStatus(cudaGetLastError(), "RopeF32 launch");
}

}  // namespace specd::cuda
