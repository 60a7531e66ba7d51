// Each CUDA kernel against a naive scalar loop on the CPU (double
// accumulation), with the largest difference printed. Without a device the
// comparisons skip with the probe's reason: a missing GPU is hardware, not a
// missing reference.
#include "cuda/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/device_probe.h"
#include "tensor/dtype.h"

namespace specd::cuda {
namespace {

TEST_F(CudaKernelTest, RmsNormMatchesScalarReference) {
  const float eps = 1e-5f;
  for (auto [n_rows, dim] : {std::pair{1, 1}, {3, 7}, {2, 255}, {4, 4096}, {5, 5120}}) {
    const std::vector<float> x = RandomVector(size_t(n_rows) * dim, 1 + dim);
    const std::vector<float> w = RandomVector(dim, 2 + dim);
    std::vector<float> ref(x.size());
    for (int t = 0; t < n_rows; ++t) {
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
      const double scale = 1.0 / std::sqrt(ss / dim + eps);
      for (int i = 0; i < dim; ++i) ref[t * dim + i] = float(x[t * dim + i] * scale * w[i]);
    }
    auto dx = Upload(x.data(), x.size() * 4);
    auto dw = Upload(w.data(), w.size() * 4);
    auto dy = NewDeviceBuffer(x.size() * 4);
    ASSERT_TRUE(dx && dw && dy.ok());
    ASSERT_TRUE(
        RmsNormF32(dx->as<float>(), dw->as<float>(), n_rows, dim, eps, (*dy)->as<float>()).ok());
    ASSERT_TRUE(Synchronize().ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE((*dy)->CopyToHost(y.data(), y.size() * 4).ok());
    double maxdiff = 0;
    for (size_t i = 0; i < y.size(); ++i)
      maxdiff = std::max(maxdiff, double(std::fabs(y[i] - ref[i])));
    std::printf("rmsnorm %dx%d maxdiff %.3g\n", n_rows, dim, maxdiff);
    EXPECT_LT(maxdiff, 1e-4) << n_rows << "x" << dim;
  }
}

TEST_F(CudaKernelTest, GemvBF16MatchesScalarReference) {
  // 4096x4096 and 64x5120 take the 8-wide path; 17x33 and 9x100 the scalar one.
  for (auto [n_out, n_in] : {std::pair{1, 8}, {17, 33}, {9, 100}, {64, 5120}, {4096, 4096}}) {
    const std::vector<float> wf = RandomVector(size_t(n_out) * n_in, 3 + n_in);
    const std::vector<float> x = RandomVector(n_in, 4 + n_in);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = F32ToBF16(wf[i]);
    std::vector<double> ref(n_out);
    std::vector<double> mag(n_out);  // sum |w x|, the scale of rounding error
    for (int o = 0; o < n_out; ++o) {
      for (int i = 0; i < n_in; ++i) {
        const double p = double(BF16ToF32(w[size_t(o) * n_in + i])) * x[i];
        ref[o] += p;
        mag[o] += std::fabs(p);
      }
    }
    auto dw = Upload(w.data(), w.size() * 2);
    auto dx = Upload(x.data(), x.size() * 4);
    auto dy = NewDeviceBuffer(size_t(n_out) * 4);
    ASSERT_TRUE(dw && dx && dy.ok());
    ASSERT_TRUE(
        GemvBF16(dw->as<uint16_t>(), dx->as<float>(), n_out, n_in, (*dy)->as<float>()).ok());
    ASSERT_TRUE(Synchronize().ok());
    std::vector<float> y(n_out);
    ASSERT_TRUE((*dy)->CopyToHost(y.data(), y.size() * 4).ok());
    double maxdiff = 0, maxrel = 0;
    for (int o = 0; o < n_out; ++o) {
      const double d = std::fabs(y[o] - ref[o]);
      maxdiff = std::max(maxdiff, d);
      maxrel = std::max(maxrel, d / (mag[o] + 1e-30));
    }
    std::printf("gemv bf16 %dx%d maxdiff %.3g (relative to sum|wx| %.3g)\n", n_out, n_in, maxdiff,
                maxrel);
    EXPECT_LT(maxrel, 2e-5) << n_out << "x" << n_in;
  }
}

TEST(CudaKernelErrorTest, CallsWithoutADeviceReturnAnError) {
  const ProbeResult& p = Probe();
  if (!p.devices.empty()) GTEST_SKIP() << "a CUDA device is present";
  auto buf = NewDeviceBuffer(256);
  ASSERT_FALSE(buf.ok());
  EXPECT_FALSE(buf.status().message().empty());
  std::printf("NewDeviceBuffer without a device: %s\n", buf.status().ToString().c_str());
  EXPECT_FALSE(Synchronize().ok());
}

TEST(CudaKernelErrorTest, BadShapesAreInvalidArguments) {
  if (!BuiltWithCuda()) {
    EXPECT_EQ(RmsNormF32(nullptr, nullptr, 1, 0, 1e-5f, nullptr).code(), StatusCode::kUnsupported);
    return;
  }
  EXPECT_EQ(RmsNormF32(nullptr, nullptr, 1, 0, 1e-5f, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GemvBF16(nullptr, nullptr, -1, 8, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(GemvBF16(nullptr, nullptr, 0, 8, nullptr).ok());  // nothing to do, no launch
}

}  // namespace
}  // namespace specd::cuda
