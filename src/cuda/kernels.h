// CUDA kernels the backend builds on, behind plain C++ signatures: no CUDA
// header or type reaches callers, so they compile without the toolkit.
//
// Pointers marked "device" point into memory from NewDeviceBuffer. Kernels run
// on the calling thread's current device (device 0 unless changed) and its
// default stream, asynchronously: Synchronize() waits and reports errors the
// kernels hit while running. In a build without CUDA every call returns
// kUnsupported with the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"

namespace specd::cuda {

// Owns `size()` bytes of device memory; frees them on destruction.
// Not thread-safe; movable only through the unique_ptr.
class DeviceBuffer {
 public:
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  // Synchronous copies. REQUIRES: bytes <= size().
  Status CopyFromHost(const void* src, size_t bytes);
  Status CopyToHost(void* dst, size_t bytes) const;

 private:
  friend StatusOr<std::unique_ptr<DeviceBuffer>> NewDeviceBuffer(size_t bytes);
  DeviceBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

// Allocates `bytes` (> 0) of device memory; fails with the cudart error (no
// driver, no device, out of memory) instead of aborting.
StatusOr<std::unique_ptr<DeviceBuffer>> NewDeviceBuffer(size_t bytes);

// Waits for the kernels queued so far; returns the first error they hit.
Status Synchronize();

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, as kernels/ops.h RmsNorm.
// Device: x, y (n_rows, dim) f32, may alias; w (dim) f32.
Status RmsNormF32(const float* x, const float* w, int n_rows, int dim, float eps, float* y);

// y[o] = sum_i W[o, i] * x[i], f32 accumulation: the one-token decode GEMV.
// Device: w (n_out, n_in) bf16 bits row-major; x (n_in) f32; y (n_out) f32.
Status GemvBF16(const uint16_t* w, const float* x, int n_out, int n_in, float* y);

}  // namespace specd::cuda
