// BF16 GEMV for one-token decode: one warp per output row streams the row
// front to back, 8 weights (16 bytes) per lane per load when the row allows,
// and reduces across the warp. Decode is bound by weight bandwidth, so the
// point is wide coalesced loads; x is small and stays in L1/L2.
#include <cstdint>

#include "cuda/cuda_status.h"
#include "cuda/kernels.h"
#include "cuda/reduce.cuh"

namespace specd::cuda {
namespace {

constexpr int kGemvRowsPerBlock = 8;  // warps per block

__device__ __forceinline__ float BF16Lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float BF16Hi(uint32_t pair) {
  return __uint_as_float(pair & 0xffff0000u);
}

// w: (n_out, n_in) bf16; x: (n_in); y: (n_out). vec8: rows are 16-byte aligned
// and n_in % 8 == 0, so each lane can load uint4 (8 bf16) at a time.
template <bool vec8>
__global__ void GemvBF16Kernel(const uint16_t* w, const float* x, int n_out, int n_in, float* y) {
  const int lane = threadIdx.x % kWarpSize;
  const int o = blockIdx.x * kGemvRowsPerBlock + threadIdx.x / kWarpSize;
  if (o >= n_out) return;  // whole warp leaves together
  const uint16_t* row = w + static_cast<size_t>(o) * n_in;
  float acc = 0.0f;
  if constexpr (vec8) {
    const uint4* row8 = reinterpret_cast<const uint4*>(row);
    for (int j = lane; j < n_in / 8; j += kWarpSize) {
      const uint4 q = row8[j];
      const float* xs = x + 8 * j;
      acc += BF16Lo(q.x) * xs[0] + BF16Hi(q.x) * xs[1] + BF16Lo(q.y) * xs[2] + BF16Hi(q.y) * xs[3] +
             BF16Lo(q.z) * xs[4] + BF16Hi(q.z) * xs[5] + BF16Lo(q.w) * xs[6] + BF16Hi(q.w) * xs[7];
    }
  } else {
    for (int i = lane; i < n_in; i += kWarpSize) {
      acc += __uint_as_float(static_cast<uint32_t>(row[i]) << 16) * x[i];
    }
  }
  acc = WarpSum(acc);
  if (lane == 0) y[o] = acc;
}

}  // namespace

Status GemvBF16(const uint16_t* w, const float* x, int n_out, int n_in, float* y) {
  if (n_out < 0 || n_in <= 0) {
    return InvalidArgumentError("GemvBF16: n_out " + std::to_string(n_out) + ", n_in " +
                                std::to_string(n_in));
  }
  if (n_out == 0) return Status::Ok();
  const int blocks = (n_out + kGemvRowsPerBlock - 1) / kGemvRowsPerBlock;
  const int threads = kGemvRowsPerBlock * kWarpSize;
  const bool vec8 = n_in % 8 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (vec8) {
    GemvBF16Kernel<true><<<blocks, threads>>>(w, x, n_out, n_in, y);
  } else {
    GemvBF16Kernel<false><<<blocks, threads>>>(w, x, n_out, n_in, y);
  }
  return CudaStatus(cudaGetLastError(), "GemvBF16 launch");
}

}  // namespace specd::cuda
