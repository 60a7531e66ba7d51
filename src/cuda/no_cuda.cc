// The cuda module in a build without CUDA (SPECD_CUDA=OFF, or AUTO with no
// nvcc at configure time): the same functions, each saying why there is
// nothing to run.
#include "cuda/device_probe.h"
#include "cuda/argmax.h"
#include "cuda/gemv_quant.h"
#include "cuda/kernels.h"
#include "cuda/paged_attention.h"
#include "cuda/rope.h"

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
Status GemvQ8_0(const void*, const float*, int, int, float*) { return NotBuilt("GemvQ8_0"); }
Status GemvQ4_0(const void*, const float*, int, int, float*) { return NotBuilt("GemvQ4_0"); }
Status GemvQ4BF16(const void*, const float*, int, int, float*) { return NotBuilt("GemvQ4BF16"); }
Status RopeF32(float*, int, int, int, const int32_t*, const float*, bool, float) {
  return NotBuilt("RopeF32");
}
Status ArgmaxRowsF32(const float*, int, int, int32_t*) { return NotBuilt("ArgmaxRowsF32"); }
Status PagedDecodeAttentionF32(const float*, int, const PagedKvF32&, const int32_t*, int,
                               const int32_t*, int, int, int, float*) {
  return NotBuilt("PagedDecodeAttentionF32");
}

}  // namespace specd::cuda
