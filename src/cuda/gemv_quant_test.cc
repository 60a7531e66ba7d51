// The block-quantized GEMVs against a naive loop over the dequantized weights
// (double accumulation). The block layouts are checked on the host first: a
// decode written from the format description equals tensor/dtype.h's
// DequantizeRow, which the CPU kernels use.
#include "cuda/gemv_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "tensor/dtype.h"

namespace specd::cuda {
namespace {

// The three formats the GEMVs take, with the tensor dtype that describes them.
struct Format {
  const char* name;
  DType dtype;
  size_t block_bytes;
  Status (*gemv)(const void*, const float*, int, int, float*);
};
const Format kFormats[] = {
    {"q8_0", DType::kQ8_0, sizeof(BlockQ8_0), GemvQ8_0},
    {"q4_0", DType::kQ4_0, sizeof(BlockQ4_0), GemvQ4_0},
    {"q4_bf16", DType::kQ4_BF16, sizeof(BlockQ4_BF16), GemvQ4BF16},
};

// (n_out, n_in) weights drawn in [-1, 1) and quantized row by row.
std::vector<uint8_t> QuantizedWeights(const Format& f, int n_out, int n_in, uint32_t seed) {
  const std::vector<float> wf = RandomVector(size_t(n_out) * n_in, seed);
  const size_t row_bytes = RowBytes(f.dtype, n_in);
  std::vector<uint8_t> w(row_bytes * n_out);
  for (int o = 0; o < n_out; ++o) {
    QuantizeRow(f.dtype, wf.data() + size_t(o) * n_in, w.data() + row_bytes * o, n_in);
  }
  return w;
}

// One block decoded as gemv_quant.h describes the layout: the scale in the
// first two bytes (fp16, or bf16 for q4_bf16), then 32 int8 (q8_0) or 16
// bytes whose low nibbles are elements 0..15 and high nibbles 16..31, each
// nibble - 8.
void NaiveDecodeBlock(const Format& f, const uint8_t* blk, float* out) {
  uint16_t d16;
  std::memcpy(&d16, blk, 2);
  const float d = f.dtype == DType::kQ4_BF16 ? BF16ToF32(d16) : F16ToF32(d16);
  const uint8_t* qs = blk + 2;
  if (f.dtype == DType::kQ8_0) {
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(static_cast<int8_t>(qs[i]));
    return;
  }
  for (int i = 0; i < 16; ++i) {
    out[i] = d * static_cast<float>((qs[i] & 0xf) - 8);
    out[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
  }
}

TEST(CudaGemvQuantLayoutTest, DocumentedBlockLayoutMatchesDequantizeRow) {
  const int n = 256;
  for (const Format& f : kFormats) {
    const std::vector<uint8_t> w = QuantizedWeights(f, 1, n, 11);
    ASSERT_EQ(w.size(), f.block_bytes * (n / 32)) << f.name;
    std::vector<float> ref(n), naive(n);
    DequantizeRow(f.dtype, w.data(), ref.data(), n);
    for (int b = 0; b < n / 32; ++b)
      NaiveDecodeBlock(f, w.data() + b * f.block_bytes, &naive[b * 32]);
    for (int i = 0; i < n; ++i) ASSERT_EQ(naive[i], ref[i]) << f.name << " element " << i;
  }
}

// y = W x in double over the dequantized weights, and sum |w x| per row (the
// scale of the f32 rounding error).
void Reference(const Format& f, const std::vector<uint8_t>& w, const std::vector<float>& x,
               int n_out, int n_in, std::vector<double>* ref, std::vector<double>* mag) {
  const size_t row_bytes = RowBytes(f.dtype, n_in);
  std::vector<float> row(n_in);
  ref->assign(n_out, 0.0);
  mag->assign(n_out, 0.0);
  for (int o = 0; o < n_out; ++o) {
    DequantizeRow(f.dtype, w.data() + row_bytes * o, row.data(), n_in);
    for (int i = 0; i < n_in; ++i) {
      const double p = double(row[i]) * x[i];
      (*ref)[o] += p;
      (*mag)[o] += std::fabs(p);
    }
  }
}

TEST_F(CudaKernelTest, QuantGemvsMatchScalarReference) {
  // Blocks per row (n_in / 32): 1, 3 and 161 take the 2-byte path only; 8 is
  // staged-eligible but shorter than one 32-block chunk; 40 is one staged
  // chunk plus 8 tail blocks; 128 and 160 are staged throughout.
  const std::pair<int, int> shapes[] = {{1, 32},    {3, 96},    {5, 256},   {7, 1280},
                                        {64, 4096}, {11, 5152}, {33, 5120}, {4096, 4096}};
  for (const Format& f : kFormats) {
    for (auto [n_out, n_in] : shapes) {
      const std::vector<uint8_t> w = QuantizedWeights(f, n_out, n_in, 5 + n_in + n_out);
      const std::vector<float> x = RandomVector(n_in, 6 + n_in);
      std::vector<double> ref, mag;
      Reference(f, w, x, n_out, n_in, &ref, &mag);
      auto dw = Upload(w);
      auto dx = Upload(x);
      auto dy = NewDeviceBuffer(size_t(n_out) * 4);
      ASSERT_TRUE(dw && dx && dy.ok());
      ASSERT_TRUE(f.gemv(dw->data(), dx->as<float>(), n_out, n_in, (*dy)->as<float>()).ok());
      const std::vector<float> y = Download<float>(**dy, n_out);
      double maxdiff = 0, maxrel = 0;
      for (int o = 0; o < n_out; ++o) {
        const double d = std::fabs(y[o] - ref[o]);
        maxdiff = std::max(maxdiff, d);
        maxrel = std::max(maxrel, d / (mag[o] + 1e-30));
      }
      std::printf("gemv %s %dx%d maxdiff %.3g (relative to sum|wx| %.3g)\n", f.name, n_out, n_in,
                  maxdiff, maxrel);
      EXPECT_LT(maxrel, 2e-5) << f.name << " " << n_out << "x" << n_in;
    }
  }
}

// The staged (16-byte) and direct (2-byte) load paths sum in the same order,
// so they agree bit for bit: the same weights at a 16-byte-aligned address
// and at one 2 bytes further.
TEST_F(CudaKernelTest, QuantGemvLoadPathsAgreeBitwise) {
  const int n_out = 37, n_in = 2048 + 256;  // 72 blocks: 2 staged chunks + 8 tail blocks
  for (const Format& f : kFormats) {
    const std::vector<uint8_t> w = QuantizedWeights(f, n_out, n_in, 21);
    std::vector<uint8_t> shifted(w.size() + 2);
    std::memcpy(shifted.data() + 2, w.data(), w.size());
    const std::vector<float> x = RandomVector(n_in, 22);
    auto dw = Upload(w);
    auto dws = Upload(shifted);
    auto dx = Upload(x);
    auto dy = NewDeviceBuffer(size_t(n_out) * 4);
    auto dys = NewDeviceBuffer(size_t(n_out) * 4);
    ASSERT_TRUE(dw && dws && dx && dy.ok() && dys.ok());
    const auto* shifted_w = static_cast<const uint8_t*>(dws->data()) + 2;
    ASSERT_TRUE(f.gemv(dw->data(), dx->as<float>(), n_out, n_in, (*dy)->as<float>()).ok());
    ASSERT_TRUE(f.gemv(shifted_w, dx->as<float>(), n_out, n_in, (*dys)->as<float>()).ok());
    const std::vector<float> y = Download<float>(**dy, n_out);
    const std::vector<float> ys = Download<float>(**dys, n_out);
    for (int o = 0; o < n_out; ++o) {
      ASSERT_EQ(std::memcmp(&y[o], &ys[o], 4), 0)
          << f.name << " row " << o << ": " << y[o] << " vs " << ys[o];
    }
  }
}

// Host-side checks, before any CUDA call: they run without a device.
TEST(CudaGemvQuantErrorTest, BadShapesAreRefusedBeforeAnyCudaCall) {
  const StatusCode want = ExpectedShapeError();
  // Fake device addresses: never dereferenced, the checks fail first.
  const auto* w = reinterpret_cast<const void*>(uintptr_t{0x10000});
  const auto* odd_w = reinterpret_cast<const void*>(uintptr_t{0x10001});
  const auto* x = reinterpret_cast<const float*>(uintptr_t{0x20000});
  auto* y = reinterpret_cast<float*>(uintptr_t{0x30000});
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    const Status bad_k = f.gemv(w, x, 4, 33, y);
    EXPECT_EQ(bad_k.code(), want);
    if (BuiltWithCuda()) {
      EXPECT_NE(bad_k.message().find("n_in 33"), std::string::npos) << bad_k.ToString();
    }
    EXPECT_EQ(f.gemv(w, x, 4, 0, y).code(), want);
    EXPECT_EQ(f.gemv(w, x, -1, 32, y).code(), want);
    EXPECT_EQ(f.gemv(nullptr, x, 4, 32, y).code(), want);
    EXPECT_EQ(f.gemv(w, nullptr, 4, 32, y).code(), want);
    EXPECT_EQ(f.gemv(w, x, 4, 32, nullptr).code(), want);
    EXPECT_EQ(f.gemv(odd_w, x, 4, 32, y).code(), want);
    if (BuiltWithCuda()) {
      EXPECT_TRUE(f.gemv(nullptr, nullptr, 0, 32, nullptr).ok());  // nothing to do, no launch
    }
  }
}

}  // namespace
}  // namespace specd::cuda
