// Row argmax (argmax.h): strided scan per thread, then warp and block
// reductions of (value, index) pairs.
#include <climits>
#include <cstdint>
#include <string>

#include "cuda/argmax.h"
#include "cuda/cuda_status.h"
#include "cuda/reduce.cuh"

namespace specd::cuda {
namespace {

constexpr int kArgmaxThreads = 256;

// True when (v, i) should replace (best, best_i): a larger value, or the same
// value at a lower index. NaN compares false both ways, so it never wins;
// the initial (-inf, INT_MAX) loses to any non-NaN entry, -inf included.
__device__ __forceinline__ bool Better(float v, int i, float best, int best_i) {
  return v > best || (v == best && i < best_i);
}

__device__ __forceinline__ void WarpArgmax(float* best, int* best_i) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, *best, offset);
    const int i = __shfl_xor_sync(0xffffffffu, *best_i, offset);
    if (Better(v, i, *best, *best_i)) {
      *best = v;
      *best_i = i;
    }
  }
}

// logits: (n_rows, vocab_size); out: (n_rows). Grid: n_rows blocks of
// kArgmaxThreads.
__global__ void ArgmaxRowsKernel(const float* logits, int vocab_size, int32_t* out) {
  __shared__ float warp_best[kArgmaxThreads / kWarpSize];
  __shared__ int warp_best_i[kArgmaxThreads / kWarpSize];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab_size;
  float best = -INFINITY;
  int best_i = INT_MAX;
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    const float v = row[i];
    if (Better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
  WarpArgmax(&best, &best_i);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  if (lane == 0) {
    warp_best[warp] = best;
    warp_best_i[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    constexpr int kWarps = kArgmaxThreads / kWarpSize;
    best = lane < kWarps ? warp_best[lane] : -INFINITY;
    best_i = lane < kWarps ? warp_best_i[lane] : INT_MAX;
    WarpArgmax(&best, &best_i);
    if (lane == 0) out[blockIdx.x] = best_i == INT_MAX ? 0 : best_i;
  }
}

}  // namespace

Status ArgmaxRowsF32(const float* logits, int n_rows, int vocab_size, int32_t* out) {
  if (n_rows < 0 || vocab_size <= 0) {
    return InvalidArgumentError("ArgmaxRowsF32: n_rows " + std::to_string(n_rows) +
                                ", vocab_size " + std::to_string(vocab_size) +
                                " (need n_rows >= 0, vocab_size > 0)");
  }
  if (n_rows == 0) return Status::Ok();
  if (logits == nullptr || out == nullptr) {
    return InvalidArgumentError("ArgmaxRowsF32: null device pointer (logits or out)");
  }
  ArgmaxRowsKernel<<<n_rows, kArgmaxThreads>>>(logits, vocab_size, out);
  return CudaStatus(cudaGetLastError(), "ArgmaxRowsF32 launch");
}

}  // namespace specd::cuda
