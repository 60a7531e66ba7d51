// Layouts of the ggml block types, checked on hand-built blocks from the
// element positions ggml_blocks.h states. gguf_quants_reference_test.cc
// compares every type with gguf-py bit for bit.
#include "tensor/ggml_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"

namespace specd {
namespace {

struct TypeCase {
  DType dtype;
  const char* name;
  int block_elems;
  size_t block_bytes;
};

constexpr TypeCase kTypes[] = {
    {DType::kQ4_1, "q4_1", 32, 20},     {DType::kQ5_0, "q5_0", 32, 22},
    {DType::kQ5_1, "q5_1", 32, 24},     {DType::kQ2_K, "q2_k", 256, 84},
    {DType::kQ3_K, "q3_k", 256, 110},   {DType::kQ4_K, "q4_k", 256, 144},
    {DType::kQ5_K, "q5_k", 256, 176},   {DType::kQ6_K, "q6_k", 256, 210},
    {DType::kIQ4_NL, "iq4_nl", 32, 18}, {DType::kIQ4_XS, "iq4_xs", 256, 136},
};

TEST(GgmlBlocksTest, SizesAndNames) {
  for (const TypeCase& c : kTypes) {
    EXPECT_STREQ(DTypeName(c.dtype), c.name);
    EXPECT_TRUE(IsQuantized(c.dtype)) << c.name;
    EXPECT_EQ(DTypeBlockElems(c.dtype), c.block_elems) << c.name;
    EXPECT_EQ(DTypeBlockBytes(c.dtype), c.block_bytes) << c.name;
    EXPECT_EQ(RowBytes(c.dtype, 4 * c.block_elems), 4 * c.block_bytes) << c.name;
  }
}

TEST(GgmlBlocksTest, KScalesRoundTripEveryValue) {
  for (int v = 0; v < 64; ++v) {
    for (int slot = 0; slot < 8; ++slot) {
      uint8_t sc[8], mn[8];
      for (int s = 0; s < 8; ++s) {
        sc[s] = static_cast<uint8_t>((v + 7 * s) % 64);
        mn[s] = static_cast<uint8_t>((63 - v + 5 * s + slot) % 64);
      }
      uint8_t packed[kKScaleBytes], sc2[8], mn2[8];
      PackKScales(sc, mn, packed);
      UnpackKScales(packed, sc2, mn2);
      EXPECT_EQ(std::memcmp(sc, sc2, 8), 0) << v;
      EXPECT_EQ(std::memcmp(mn, mn2, 8), 0) << v;
    }
  }
}

TEST(GgmlBlocksTest, Q3KScalesFromTheirBitFields) {
  // Scale 5: low nibble in byte 5, high bits 2..3 of byte 8 + 1.
  uint8_t b[kKScaleBytes] = {};
  b[5] = 0x0b;
  b[9] = 0x2 << 2;
  int8_t s[16];
  UnpackQ3KScales(b, s);
  EXPECT_EQ(s[5], (0x0b | 0x2 << 4) - 32);
  // Scale 13: high nibble of byte 5, bits 6..7 of byte 9.
  b[5] = 0xf0;
  b[9] = 0x3 << 6;
  UnpackQ3KScales(b, s);
  EXPECT_EQ(s[13], 63 - 32);
  EXPECT_EQ(s[0], -32);
}

std::vector<float> Dequant(DType t, const void* block) {
  std::vector<float> y(static_cast<size_t>(DTypeBlockElems(t)));
  DequantizeRow(t, block, y.data(), DTypeBlockElems(t));
  return y;
}

TEST(GgmlBlocksTest, Q4_1IsScaleTimesNibblePlusMin) {
  BlockQ4_1 b{};
  b.d = F32ToF16(0.5f);
  b.m = F32ToF16(-1.f);
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const std::vector<float> y = Dequant(DType::kQ4_1, &b);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(y[i], 0.5f * i - 1.f) << i;
    EXPECT_EQ(y[i + 16], 0.5f * (15 - i) - 1.f) << i;
  }
}

TEST(GgmlBlocksTest, Q5TakesBitJOfQhAsTheFifthBit) {
  BlockQ5_0 b{};
  b.d = F32ToF16(2.f);
  uint32_t qh = 1u << 3 | 1u << 20;
  std::memcpy(b.qh, &qh, 4);
  b.qs[3] = 0x05;  // element 3: 5 | 16 = 21
  b.qs[4] = 0x70;  // element 20: 7 | 16 = 23
  std::vector<float> y = Dequant(DType::kQ5_0, &b);
  EXPECT_EQ(y[3], 2.f * (21 - 16));
  EXPECT_EQ(y[20], 2.f * (23 - 16));
  EXPECT_EQ(y[0], 2.f * -16);
  BlockQ5_1 c{};
  c.d = F32ToF16(2.f);
  c.m = F32ToF16(0.25f);
  std::memcpy(c.qh, &qh, 4);
  c.qs[3] = 0x05;
  y = Dequant(DType::kQ5_1, &c);
  EXPECT_EQ(y[3], 2.f * 21 + 0.25f);
  EXPECT_EQ(y[1], 0.25f);
}

TEST(GgmlBlocksTest, IQ4NLLooksUpTheNonLinearLevels) {
  BlockIQ4_NL b{};
  b.d = F32ToF16(1.f);
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(i | (15 - i) << 4);
  const std::vector<float> y = Dequant(DType::kIQ4_NL, &b);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(y[i], kIq4NlValues[i]);
    EXPECT_EQ(y[i + 16], kIq4NlValues[15 - i]);
  }
}

TEST(GgmlBlocksTest, Q2KElementPositions) {
  BlockQ2_K b{};
  b.d = F32ToF16(1.f);
  b.dmin = F32ToF16(0.5f);
  // Element 128 + 2 * 32 + 17 (h 1, j 2, l 17): bits 4..5 of qs[32 + 17],
  // sub-block 13.
  b.qs[49] = 3 << 4;
  b.scales[13] = 0x27;  // scale 7, min 2
  const std::vector<float> y = Dequant(DType::kQ2_K, &b);
  EXPECT_EQ(y[128 + 64 + 17], 7.f * 3 - 0.5f * 2);
  EXPECT_EQ(y[128 + 64 + 16], 7.f * 0 - 0.5f * 2);
  EXPECT_EQ(y[128 + 17], 0.f);
}

TEST(GgmlBlocksTest, Q3KHighBitClearSubtractsFour) {
  BlockQ3_K b{};
  b.d = F32ToF16(1.f);
  b.scales[0] = 0x01;  // scale 0, low nibble
  b.scales[8] = 0x02;  // scale 0, high bits: (1 | 2 << 4) - 32 = 1
  b.qs[0] = 0x3;       // element 0: low 2 bits 3
  b.hmask[1] = 0x1;    // element 1: high bit set -> q = 0
  const std::vector<float> y = Dequant(DType::kQ3_K, &b);
  EXPECT_EQ(y[0], 1.f * (3 - 4));
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 1.f * -4);
}

TEST(GgmlBlocksTest, Q4KAndQ5KElementPositions) {
  BlockQ4_K b{};
  b.d = F32ToF16(1.f);
  b.dmin = F32ToF16(1.f);
  uint8_t sc[8] = {1, 2, 3, 4, 5, 6, 7, 63}, mn[8] = {0, 0, 0, 0, 0, 0, 0, 10};
  PackKScales(sc, mn, b.scales);
  b.qs[96 + 5] = 0x9 << 4;  // element 224 + 5: high nibble of qs[96 + 5], sub-block 7
  std::vector<float> y = Dequant(DType::kQ4_K, &b);
  EXPECT_EQ(y[229], 63.f * 9 - 10.f);
  EXPECT_EQ(y[197], 7.f * 0);
  BlockQ5_K c{};
  c.d = b.d;
  c.dmin = b.dmin;
  std::memcpy(c.scales, b.scales, kKScaleBytes);
  std::memcpy(c.qs, b.qs, sizeof(c.qs));
  c.qh[5] = 1 << 7;  // bit 7: sub-block 7
  y = Dequant(DType::kQ5_K, &c);
  EXPECT_EQ(y[229], 63.f * (9 + 16) - 10.f);
}

TEST(GgmlBlocksTest, Q6KElementPositions) {
  BlockQ6_K b{};
  b.d = F32ToF16(0.5f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  // Element 128 + 3 * 32 + 4 (h 1, j 3, l 4): high nibble of ql[64 + 32 + 4],
  // bits 6..7 of qh[32 + 4], sub-block 14.
  b.ql[100] = 0xa << 4;
  b.qh[36] = 0x2 << 6;
  const std::vector<float> y = Dequant(DType::kQ6_K, &b);
  EXPECT_EQ(y[228], 0.5f * 6 * ((0xa | 0x2 << 4) - 32));
  EXPECT_EQ(y[0], 0.5f * -8 * -32);
}

TEST(GgmlBlocksTest, IQ4XSSubBlockScales) {
  BlockIQ4_XS b{};
  b.d = F32ToF16(1.f);
  // Sub-block 3: low nibble = high nibble of scales_l[1], high bits 6..7.
  b.scales_l[1] = 0x50;
  b.scales_h = 0x3 << 6;
  b.qs[48 + 2] = 0xf << 4;  // element 96 + 18
  const std::vector<float> y = Dequant(DType::kIQ4_XS, &b);
  EXPECT_EQ(y[96 + 18], (0x5 + 48 - 32) * 113.f);
  EXPECT_EQ(y[0], -32.f * -127);
}

// Largest error of a round trip relative to the block's largest magnitude,
// for rows of mixed scales (a spike per row, as real weights have).
float RoundTripError(DType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(RowBytes(t, n));
  std::vector<float> y(x.size());
  QuantizeRow(t, x.data(), q.data(), n);
  DequantizeRow(t, q.data(), y.data(), n);
  const int be = DTypeBlockElems(t);
  float worst = 0.f;
  for (int64_t b = 0; b < n / be; ++b) {
    float amax = 0.f, err = 0.f;
    for (int i = 0; i < be; ++i) {
      amax = std::max(amax, std::fabs(x[b * be + i]));
      err = std::max(err, std::fabs(x[b * be + i] - y[b * be + i]));
    }
    if (amax > 0.f) worst = std::max(worst, err / amax);
  }
  return worst;
}

TEST(GgmlBlocksTest, QuantizeRoundTripsWithinTheFormatsPrecision) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> x(4 * kSuperBlock);
  for (size_t i = 0; i < x.size(); ++i) x[i] = dist(rng) * (0.01f + 0.02f * (i / 64 % 4));
  x[37] = 0.5f;
  x[600] = -0.4f;
  // Worst error relative to the block's largest magnitude: about half a
  // level step, plus the coarser sub-block scales of the K-quants; a whole
  // step for the symmetric types whose largest magnitude takes the extreme
  // negative level (Q5_0: +amax clamps to 15 / 16; IQ4: to 113 / 127).
  const struct {
    DType t;
    float bound;
  } kBounds[] = {
      {DType::kQ4_1, 0.075f},  {DType::kQ5_0, 0.07f},  {DType::kQ5_1, 0.035f},
      {DType::kQ2_K, 0.45f},   {DType::kQ3_K, 0.3f},   {DType::kQ4_K, 0.1f},
      {DType::kQ5_K, 0.05f},   {DType::kQ6_K, 0.025f}, {DType::kIQ4_NL, 0.12f},
      {DType::kIQ4_XS, 0.14f},
  };
  for (const auto& c : kBounds) {
    const float err = RoundTripError(c.t, x);
    EXPECT_LT(err, c.bound) << DTypeName(c.t);
    EXPECT_GT(err, 0.f) << DTypeName(c.t);
  }
}

TEST(GgmlBlocksTest, QuantizeKeepsZeroAndConstantRows) {
  for (const TypeCase& c : kTypes) {
    for (float v : {0.f, 0.75f, -3.f}) {
      std::vector<float> x(kSuperBlock, v), y(kSuperBlock);
      std::vector<uint8_t> q(RowBytes(c.dtype, kSuperBlock));
      QuantizeRow(c.dtype, x.data(), q.data(), kSuperBlock);
      DequantizeRow(c.dtype, q.data(), y.data(), kSuperBlock);
      for (int i = 0; i < kSuperBlock; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << c.name;
        ASSERT_NEAR(y[i], v, std::fabs(v) * 0.08f + 1e-6f) << c.name << " " << v << " at " << i;
      }
    }
  }
}

TEST(GgmlBlocksTest, QuantizeHandlesScalesBelowFp16Range) {
  // Steps that round to fp16 subnormals or zero: the quants stay in range
  // and the values finite.
  for (const TypeCase& c : kTypes) {
    std::vector<float> x(kSuperBlock), y(kSuperBlock);
    for (int i = 0; i < kSuperBlock; ++i) x[i] = (i % 7 - 3) * 1e-9f;
    x[5] = 3e-6f;
    x[200] = -1e30f * 0.f;
    std::vector<uint8_t> q(RowBytes(c.dtype, kSuperBlock));
    QuantizeRow(c.dtype, x.data(), q.data(), kSuperBlock);
    DequantizeRow(c.dtype, q.data(), y.data(), kSuperBlock);
    for (int i = 0; i < kSuperBlock; ++i) ASSERT_TRUE(std::isfinite(y[i])) << c.name << " " << i;
  }
}

}  // namespace
}  // namespace specd
