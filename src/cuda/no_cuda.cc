// The cuda module in a build without CUDA (SPECD_CUDA=OFF, or AUTO with no
// nvcc at configure time): the same functions, each saying why there is
// nothing to run.
#include "cuda/device_probe.h"
#include "cuda/kernels.h"

namespace specd::cuda {
namespace {

constexpr const char* kNotBuilt =
    "built without CUDA (SPECD_CUDA=OFF or no nvcc at configure time)";

Status NotBuilt(const char* what) { return UnsupportedError(std::string(what) + ": " + kNotBuilt); }

}  // namespace

bool BuiltWithCuda() { return false; }

ProbeResult ProbeDevices() {
  ProbeResult p;
  p.reason = kNotBuilt;
  return p;
}

DeviceBuffer::~DeviceBuffer() = default;
Status DeviceBuffer::CopyFromHost(const void*, size_t) { return NotBuilt("CopyFromHost"); }
Status DeviceBuffer::CopyToHost(void*, size_t) const { return NotBuilt("CopyToHost"); }
StatusOr<std::unique_ptr<DeviceBuffer>> NewDeviceBuffer(size_t) {
  return NotBuilt("NewDeviceBuffer");
}
Status Synchronize() { return NotBuilt("Synchronize"); }
Status RmsNormF32(const float*, const float*, int, int, float, float*) {
  return NotBuilt("RmsNormF32");
}
Status GemvBF16(const uint16_t*, const float*, int, int, float*) { return NotBuilt("GemvBF16"); }

}  // namespace specd::cuda
