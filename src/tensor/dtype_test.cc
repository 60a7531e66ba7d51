#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace specd {
namespace {

TEST(DTypeTest, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(DTypeTest, F16KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(65504.f), 0x7bff);
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  // 1 + 2^-11 is halfway between 1 and the next half: ties to even (1.0).
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
}

TEST(DTypeTest, BF16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
  EXPECT_EQ(F32ToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

TEST(DTypeTest, QuantizedRoundTripWithinHalfStep) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> x(96), y(96);
  for (auto& v : x) v = dist(rng);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    std::vector<uint8_t> buf(RowBytes(t, 96));
    QuantizeRow(t, x.data(), buf.data(), 96);
    DequantizeRow(t, buf.data(), y.data(), 96);
    for (int b = 0; b < 3; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      // Q8_0: half a step. Q4_0 (levels -8..7 scaled by the signed max): a value
      // of the opposite sign near -max clamps to level 7, one full step off.
      float tol = t == DType::kQ8_0 ? amax / 127 * 0.51f : amax / 8 * 1.01f;
      for (int i = 0; i < 32; ++i)
        EXPECT_NEAR(x[b * 32 + i], y[b * 32 + i], tol + 1e-3f * amax)
            << DTypeName(t) << " block " << b << " elem " << i;
    }
  }
}

}  // namespace
}  // namespace specd
