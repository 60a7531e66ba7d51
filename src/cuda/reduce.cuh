// Internal to src/cuda: warp and block sum reductions for the kernels.
#pragma once

namespace specd::cuda {

constexpr int kWarpSize = 32;

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum over the whole block; every thread gets the result.
// REQUIRES: blockDim.x is a multiple of 32 and at most 1024; all threads call it.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float partial[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x / kWarpSize;
  v = lane < n_warps ? partial[lane] : 0.0f;
  v = WarpSum(v);
  __syncthreads();  // partial[] may be reused by a following BlockSum
  return v;
}

}  // namespace specd::cuda
