#include "cuda/cuda_status.h"
#include "cuda/kernels.h"

namespace specd::cuda {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // an error here has no one to report to
}

Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes) {
  if (bytes > size_) {
    return InvalidArgumentError("copy of " + std::to_string(bytes) + " bytes into a " +
                                std::to_string(size_) + "-byte device buffer");
  }
  return CudaStatus(cudaMemcpy(data_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

Status DeviceBuffer::CopyToHost(void* dst, size_t bytes) const {
  if (bytes > size_) {
    return InvalidArgumentError("copy of " + std::to_string(bytes) + " bytes from a " +
                                std::to_string(size_) + "-byte device buffer");
  }
  return CudaStatus(cudaMemcpy(dst, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

StatusOr<std::unique_ptr<DeviceBuffer>> NewDeviceBuffer(size_t bytes) {
  if (bytes == 0) return InvalidArgumentError("device buffer of 0 bytes");
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // allocation failures are not sticky; clear for the next call
    return CudaStatus(err, ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  }
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(p, bytes));
}

Status Synchronize() { return CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace specd::cuda
