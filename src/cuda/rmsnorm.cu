// RMSNorm, one block per row: the sum of squares is a block reduction, then
// every thread scales its strided share of the row.
#include "cuda/cuda_status.h"
#include "cuda/kernels.h"
#include "cuda/reduce.cuh"

namespace specd::cuda {
namespace {

constexpr int kRmsNormThreads = 256;

// x, y: (n_rows, dim); w: (dim). Grid: n_rows blocks of kRmsNormThreads.
__global__ void RmsNormF32Kernel(const float* x, const float* w, int dim, float eps, float* y) {
  const size_t row = static_cast<size_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = x[row + i];
    ss += v * v;
  }
  ss = BlockSum(ss);
  const float scale = rsqrtf(ss / static_cast<float>(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) y[row + i] = x[row + i] * scale * w[i];
}

}  // namespace

Status RmsNormF32(const float* x, const float* w, int n_rows, int dim, float eps, float* y) {
  if (n_rows < 0 || dim <= 0) {
    return InvalidArgumentError("RmsNormF32: n_rows " + std::to_string(n_rows) + ", dim " +
                                std::to_string(dim));
  }
  if (n_rows == 0) return Status::Ok();
  RmsNormF32Kernel<<<n_rows, kRmsNormThreads>>>(x, w, dim, eps, y);
  return CudaStatus(cudaGetLastError(), "RmsNormF32 launch");
}

}  // namespace specd::cuda
