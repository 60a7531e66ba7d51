// Shared by the cuda module's tests: the fixture that skips without a usable
// device (with the probe's reason), seeded inputs and host <-> device copies.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "cuda/device_probe.h"
#include "cuda/kernels.h"

namespace specd::cuda {

inline const ProbeResult& Probe() {
  static const ProbeResult probe = ProbeDevices();
  return probe;
}

// Kernel comparisons: skip when there is no device to run them, or when this
// build has no kernel image for device 0.
class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ProbeResult& p = Probe();
    if (p.devices.empty()) GTEST_SKIP() << "no CUDA device: " << p.reason;
    if (!p.devices[0].unsupported_reason.empty()) {
      GTEST_SKIP() << p.devices[0].name << ": " << p.devices[0].unsupported_reason;
    }
  }
};

// The InvalidArgument a host-side shape check gives in a CUDA build; a build
// without CUDA answers every call with kUnsupported.
inline StatusCode ExpectedShapeError() {
  return BuiltWithCuda() ? StatusCode::kInvalidArgument : StatusCode::kUnsupported;
}

// n values uniform in [lo, hi), the same for the same seed.
inline std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A device buffer holding a copy of `bytes` bytes at `data`; null (with a
// test failure) when allocation or copy fails.
inline std::unique_ptr<DeviceBuffer> Upload(const void* data, size_t bytes) {
  auto buf = NewDeviceBuffer(bytes);
  EXPECT_TRUE(buf.ok()) << buf.status().ToString();
  if (!buf.ok()) return nullptr;
  Status st = (*buf)->CopyFromHost(data, bytes);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return nullptr;
  return std::move(buf).value();
}

template <typename T>
std::unique_ptr<DeviceBuffer> Upload(const std::vector<T>& v) {
  return Upload(v.data(), v.size() * sizeof(T));
}

// Waits for the device, then copies n values of T from `buf`.
template <typename T>
std::vector<T> Download(const DeviceBuffer& buf, size_t n) {
  std::vector<T> out(n);
  Status st = Synchronize();
  EXPECT_TRUE(st.ok()) << st.ToString();
  st = buf.CopyToHost(out.data(), n * sizeof(T));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

}  // namespace specd::cuda
