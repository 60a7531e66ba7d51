// RopeF32 against the kernels/cpu/reference.cc loop (angles, cos and sin in
// double), with YaRN's attention factor applied to cos and sin.
#include "cuda/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "cuda/cuda_test_util.h"

namespace specd::cuda {
namespace {

// x: (n_tokens, n_heads, head_dim), rotated in place in double.
void ReferenceRope(std::vector<float>* x, int n_tokens, int n_heads, int head_dim,
                   const std::vector<int32_t>& pos, const std::vector<float>& inv_freq,
                   bool interleaved, double attention_factor) {
  const int half = head_dim / 2;
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      float* v = x->data() + (size_t(t) * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = double(pos[t]) * double(inv_freq[i]);
        const double c = std::cos(angle) * attention_factor;
        const double s = std::sin(angle) * attention_factor;
        const int i0 = interleaved ? 2 * i : i;
        const int i1 = interleaved ? 2 * i + 1 : i + half;
        const double a = v[i0], b = v[i1];
        v[i0] = float(a * c - b * s);
        v[i1] = float(a * s + b * c);
      }
    }
  }
}

std::vector<float> InvFreq(int head_dim, double theta) {
  std::vector<float> f(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) f[i] = float(std::pow(theta, -2.0 * i / head_dim));
  return f;
}

TEST_F(CudaKernelTest, RopeMatchesScalarReference) {
  // Positions up to 131071: long-context angles, where f32 angles would fail.
  const std::vector<int32_t> pos = {0, 1, 7, 4095, 100000, 131071};
  const int n_tokens = static_cast<int>(pos.size());
  struct Case {
    int n_heads, head_dim;
    bool interleaved;
    double attention_factor;  // 1.3465...: YaRN factor 32, 0.1 ln(32) + 1
  };
  const double yarn = 0.1 * std::log(32.0) + 1.0;
  for (const Case& c : {Case{4, 128, false, 1.0}, Case{4, 128, true, 1.0}, Case{3, 64, false, yarn},
                        Case{2, 64, true, yarn}, Case{5, 6, false, 1.0}, Case{1, 2, true, 1.0}}) {
    std::vector<float> x = RandomVector(size_t(n_tokens) * c.n_heads * c.head_dim, 31 + c.head_dim);
    const std::vector<float> inv_freq = InvFreq(c.head_dim, 500000.0);
    std::vector<float> ref = x;
    ReferenceRope(&ref, n_tokens, c.n_heads, c.head_dim, pos, inv_freq, c.interleaved,
                  c.attention_factor);
    auto dx = Upload(x);
    auto dpos = Upload(pos);
    auto dfreq = Upload(inv_freq);
    ASSERT_TRUE(dx && dpos && dfreq);
    ASSERT_TRUE(RopeF32(dx->as<float>(), n_tokens, c.n_heads, c.head_dim, dpos->as<int32_t>(),
                        dfreq->as<float>(), c.interleaved, float(c.attention_factor))
                    .ok());
    const std::vector<float> y = Download<float>(*dx, x.size());
    double maxdiff = 0;
    for (size_t i = 0; i < y.size(); ++i)
      maxdiff = std::max(maxdiff, double(std::fabs(y[i] - ref[i])));
    std::printf("rope %d heads x %d%s factor %.4f maxdiff %.3g\n", c.n_heads, c.head_dim,
                c.interleaved ? " interleaved" : "", c.attention_factor, maxdiff);
    EXPECT_LT(maxdiff, 1e-5) << c.n_heads << "x" << c.head_dim;
  }
}

TEST(CudaRopeErrorTest, BadShapesAreRefusedBeforeAnyCudaCall) {
  const StatusCode want = ExpectedShapeError();
  auto* x = reinterpret_cast<float*>(uintptr_t{0x10000});
  const auto* pos = reinterpret_cast<const int32_t*>(uintptr_t{0x20000});
  const auto* f = reinterpret_cast<const float*>(uintptr_t{0x30000});
  const Status odd = RopeF32(x, 1, 1, 7, pos, f, false, 1.0f);
  EXPECT_EQ(odd.code(), want);
  if (BuiltWithCuda()) {
    EXPECT_NE(odd.message().find("head_dim 7"), std::string::npos) << odd.ToString();
  }
  EXPECT_EQ(RopeF32(x, 1, 1, 0, pos, f, false, 1.0f).code(), want);
  EXPECT_EQ(RopeF32(x, -1, 1, 8, pos, f, false, 1.0f).code(), want);
  EXPECT_EQ(RopeF32(x, 1, 0, 8, pos, f, false, 1.0f).code(), want);
  EXPECT_EQ(RopeF32(x, 1, 1, 8, pos, f, false, std::numeric_limits<float>::quiet_NaN()).code(),
            want);
  EXPECT_EQ(RopeF32(nullptr, 1, 1, 8, pos, f, true, 1.0f).code(), want);
  EXPECT_EQ(RopeF32(x, 1, 1, 8, nullptr, f, true, 1.0f).code(), want);
  EXPECT_EQ(RopeF32(x, 1, 1, 8, pos, nullptr, true, 1.0f).code(), want);
  if (BuiltWithCuda()) {
    EXPECT_TRUE(RopeF32(nullptr, 0, 1, 8, nullptr, nullptr, false, 1.0f).ok());
  }
}

}  // namespace
}  // namespace specd::cuda
