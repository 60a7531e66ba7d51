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
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_BF16}) {
    std::vector<uint8_t> buf(RowBytes(t, 96));
    QuantizeRow(t, x.data(), buf.data(), 96);
    DequantizeRow(t, buf.data(), y.data(), 96);
    for (int b = 0; b < 3; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      // Q8_0: half a step. Q4_0 (levels -8..7 scaled by the signed max): a value
      // of the opposite sign near -max clamps to level 7, one full step off.
      // Q4_BF16 (scale amax / 7.5, symmetric): half a step, plus the input's
      // bf16 rounding.
      float tol = t == DType::kQ8_0   ? amax / 127 * 0.51f
                  : t == DType::kQ4_0 ? amax / 8 * 1.01f
                                      : amax / 7.5f * 0.51f + amax / 256;
      for (int i = 0; i < 32; ++i)
        EXPECT_NEAR(x[b * 32 + i], y[b * 32 + i], tol + 1e-3f * amax)
            << DTypeName(t) << " block " << b << " elem " << i;
    }
  }
}


// compressed-tensors' INT4 rounding on hand-computed values: amax 7.5 gives
// the scale 1, so q = round_half_even(clamp(x, -8, 7)).
TEST(DTypeTest, Q4Bf16QuantizesAsCompressedTensors) {
  std::vector<float> x(32, 0.f);
  x[0] = 7.5f;    // amax: 7.5 clamps to 7
  x[1] = -7.5f;   // -7.5 rounds half to even: -8
  x[2] = 2.5f;    // -> 2
  x[3] = 3.5f;    // -> 4
  x[4] = -0.5f;   // -> -0 = 0
  x[16] = 1.25f;  // -> 1 (high nibble of qs[0])
  x[31] = -3.f;   // -> -3 (high nibble of qs[15])
  std::vector<uint16_t> xb(32);
  for (int i = 0; i < 32; ++i) xb[i] = F32ToBF16(x[i]);
  BlockQ4_BF16 b;
  QuantizeRowQ4_BF16(xb.data(), &b, 32);
  EXPECT_EQ(b.d, F32ToBF16(1.f));
  EXPECT_EQ(b.qs[0], (7 + 8) | ((1 + 8) << 4));
  EXPECT_EQ(b.qs[1], (-8 + 8) | (8 << 4));
  EXPECT_EQ(b.qs[2], (2 + 8) | (8 << 4));
  EXPECT_EQ(b.qs[3], (4 + 8) | (8 << 4));
  EXPECT_EQ(b.qs[4], 8 | (8 << 4));
  EXPECT_EQ(b.qs[15], 8 | ((-3 + 8) << 4));
  std::vector<float> y(32);
  DequantizeRow(DType::kQ4_BF16, &b, y.data(), 32);
  EXPECT_EQ(y[0], 7.f);
  EXPECT_EQ(y[1], -8.f);
  EXPECT_EQ(y[16], 1.f);
  EXPECT_EQ(y[31], -3.f);
}

TEST(DTypeTest, Q4Bf16ZeroBlockGetsBf16Epsilon) {
  std::vector<uint16_t> xb(64, 0);
  xb[40] = F32ToBF16(0.75f);  // second block: amax 0.75 -> scale bf16(0.1)
  BlockQ4_BF16 b[2];
  QuantizeRowQ4_BF16(xb.data(), b, 64);
  EXPECT_EQ(b[0].d, 0x3c00);  // torch.finfo(torch.bfloat16).eps = 2^-7
  for (uint8_t q : b[0].qs) EXPECT_EQ(q, 0x88);
  EXPECT_EQ(b[1].d, F32ToBF16(0.75f / 7.5f));
  // Element 40 is element 8 of block 1, the low nibble of qs[8]:
  // 0.75 / bf16(0.1) = 7.02 -> bf16 7.03125 -> clamped to 7.
  EXPECT_EQ(b[1].qs[8], (7 + 8) | (8 << 4));
  EXPECT_EQ(RowBytes(DType::kQ4_BF16, 64), 36u);
  EXPECT_EQ(DTypeBlockElems(DType::kQ4_BF16), 32);
  EXPECT_TRUE(IsQuantized(DType::kQ4_BF16));
  EXPECT_EQ(ParseDType("q4_bf16").value(), DType::kQ4_BF16);
}

// Dequantized values are exact in f32: scale (8 significant bits) times an
// integer in [-8, 7], subnormal scales included (scales below 2^121, so no
// product overflows).
TEST(DTypeTest, Q4Bf16DequantizesExactly) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 1000; ++trial) {
    BlockQ4_BF16 b;
    b.d = static_cast<uint16_t>(rng() % 0x7c00 | (rng() & 0x8000));
    for (auto& q : b.qs) q = static_cast<uint8_t>(rng());
    float y[32];
    DequantizeRow(DType::kQ4_BF16, &b, y, 32);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(static_cast<double>(y[i]),
                static_cast<double>(BF16ToF32(b.d)) * ((b.qs[i] & 0xf) - 8));
      EXPECT_EQ(static_cast<double>(y[i + 16]),
                static_cast<double>(BF16ToF32(b.d)) * ((b.qs[i] >> 4) - 8));
    }
  }
}

}  // namespace
}  // namespace specd
