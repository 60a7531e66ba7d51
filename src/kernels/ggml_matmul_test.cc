// MatMul of the ggml block types without an integer kernel (Q4_1, Q5_0,
// Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS; cpu/dequant_matmul.h) on every
// dequantizer this CPU runs: against the scalar reference on odd shapes,
// bitwise against the F32 matmul of the dequantized weights, and bitwise
// batch-invariant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dequant_matmul.h"
#include "kernels/cpu/reference.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ops.h"

namespace specd::kernels {
namespace {

constexpr DType kTypes[] = {DType::kQ4_1,   DType::kQ5_0,  DType::kQ5_1, DType::kQ2_K,
                            DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K, DType::kQ6_K,
                            DType::kIQ4_NL, DType::kIQ4_XS};

// sum_i |w[r, i] * x[t, i]|: the scale of rounding errors in output (t, r).
double AbsDot(const Weights& w, const std::vector<float>& x, int64_t cols, int64_t r, int t) {
  double s = 0;
  for (int64_t i = 0; i < cols; ++i)
    s += std::fabs(static_cast<double>(w.deq[r * cols + i]) * x[t * cols + i]);
  return s;
}

// The dequantized weights as an F32 matrix.
Weights AsF32(const Weights& w) {
  Weights f;
  f.deq = w.deq;
  f.bytes.resize(w.deq.size() * sizeof(float));
  std::memcpy(f.bytes.data(), w.deq.data(), f.bytes.size());
  f.view = w.view;
  f.view.name = w.view.name + ".f32";
  f.view.dtype = DType::kF32;
  f.view.data = f.bytes.data();
  f.view.nbytes = f.bytes.size();
  return f;
}

// Row lengths: one block, a few, and an odd count of blocks.
std::vector<int64_t> ColsFor(DType t) {
  return DTypeBlockElems(t) == 256 ? std::vector<int64_t>{256, 768, 2304}
                                   : std::vector<int64_t>{32, 96, 160, 1056};
}

struct Case {
  QuantDotIsa isa;
  DType dtype;
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  return std::string(QuantDotIsaName(info.param.isa)) + "_" + DTypeName(info.param.dtype);
}

class GgmlMatMulTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!SetQuantDotIsa(GetParam().isa)) {
      GTEST_SKIP() << "not supported: this CPU lacks " << QuantDotIsaName(GetParam().isa)
                   << " (flags: " << GetCpuFeatures().FlagString() << ")";
    }
  }
  void TearDown() override {
    SetQuantDotIsa(GetKernelPaths().quant_dot);
    SetStreamDecode(true);
    SetBatchInvariant(false);
  }
};

TEST_P(GgmlMatMulTest, MatchesReference) {
  // The weights dequantize exactly and x stays f32: only f32 rounding differs
  // from the f64 reference.
  const DType dtype = GetParam().dtype;
  ThreadPool pool(3);
  for (int64_t cols : ColsFor(dtype)) {
    for (int64_t rows : {1, 5, 31, 50}) {
      Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows + 17 * cols));
      for (int n_tokens : {1, 2, 3, 7, 8, 13, 16, 33}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                     " n_tokens=" + std::to_string(n_tokens));
        std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens * 3 + cols));
        std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows), y_ref(n_tokens * rows);
        MatMul(w.view, x.data(), n_tokens, y.data(), nullptr);
        MatMul(w.view, x.data(), n_tokens, y_pool.data(), &pool);
        ref::MatMul(w.view, x.data(), n_tokens, y_ref.data());
        for (int t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = t * rows + r;
            ASSERT_NEAR(y[i], y_ref[i], 1e-5 * AbsDot(w, x, cols, r, t) + 1e-30)
                << "t=" << t << " r=" << r;
            ASSERT_EQ(y[i], y_pool[i]) << "t=" << t << " r=" << r;
          }
        }
      }
    }
  }
}

// The contract of cpu/dequant_matmul.h: bitwise the F32 matmul of the
// dequantized weights, in every decode layout, and for row ranges too.
TEST_P(GgmlMatMulTest, EqualsF32MatMulOfDequantizedWeightsBitwise) {
  const DType dtype = GetParam().dtype;
  ThreadPool pool(2);
  for (bool stream : {true, false}) {
    SetStreamDecode(stream);
    for (int64_t cols : ColsFor(dtype)) {
      const int64_t rows = 37;
      Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(cols));
      Weights f = AsF32(w);
      for (int n_tokens : {1, 4, 9}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " n_tokens=" + std::to_string(n_tokens) +
                     (stream ? " stream" : " 4-row"));
        std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens));
        std::vector<float> y(n_tokens * rows), y_f32(n_tokens * rows);
        MatMul(w.view, x.data(), n_tokens, y.data(), &pool);
        MatMul(f.view, x.data(), n_tokens, y_f32.data(), nullptr);
        ASSERT_EQ(std::memcmp(y.data(), y_f32.data(), y.size() * sizeof(float)), 0);
        // Rows [3, 30): the same values as the full matmul's.
        const int64_t n = 27;
        std::vector<float> part(n_tokens * n);
        MatMulRows(w.view, 3, 3 + n, x.data(), n_tokens, part.data(), &pool);
        for (int t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < n; ++r) ASSERT_EQ(part[t * n + r], y[t * rows + 3 + r]);
        }
      }
    }
  }
}

// A token's outputs are bitwise the same alone (decode) or inside a batch of
// any size at any offset, in both modes and decode layouts, with and without
// threads.
TEST_P(GgmlMatMulTest, BatchedEqualsOneTokenBitwise) {
  const DType dtype = GetParam().dtype;
  ThreadPool pool(3);
  for (bool invariant : {false, true}) {
    SetBatchInvariant(invariant);
    for (bool stream : {true, false}) {
      SetStreamDecode(stream);
      for (int64_t cols : ColsFor(dtype)) {
        for (int64_t rows : {1, 7, 33}) {
          Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows * 5 + cols));
          for (int n_tokens : {2, 3, 5, 6, 7, 8, 11, 13, 16, 17, 33, 64}) {
            SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                         " n_tokens=" + std::to_string(n_tokens) + (invariant ? " invariant" : "") +
                         (stream ? " stream" : " 4-row"));
            std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens + cols));
            std::vector<float> y(n_tokens * rows), y1(rows);
            MatMul(w.view, x.data(), n_tokens, y.data(), &pool);
            for (int t = 0; t < n_tokens; ++t) {
              MatMul(w.view, x.data() + t * cols, 1, y1.data(), t % 2 ? &pool : nullptr);
              for (int64_t r = 0; r < rows; ++r)
                ASSERT_EQ(y[t * rows + r], y1[r]) << "t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (QuantDotIsa isa : {QuantDotIsa::kScalar, QuantDotIsa::kAvx2}) {
    for (DType t : kTypes) cases.push_back({isa, t});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, GgmlMatMulTest, testing::ValuesIn(AllCases()), CaseName);

TEST(DequantPathTest, FollowsTheQuantizedDotPath) {
  ASSERT_TRUE(SetQuantDotIsa(QuantDotIsa::kScalar));
  EXPECT_STREQ(ActiveDequantPath(), "portable");
  if (SetQuantDotIsa(QuantDotIsa::kAvx2)) {
    EXPECT_STREQ(ActiveDequantPath(), "avx2");
  }
  SetQuantDotIsa(GetKernelPaths().quant_dot);
}

// Byte offsets of each type's fp16 fields (tensor/ggml_blocks.h).
std::vector<int> HalfOffsets(DType t) {
  switch (t) {
    case DType::kQ4_1:
      return {0, 2};
    case DType::kQ5_1:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ4_K:
      return {0, 2};
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ6_K:
      return {208};
    default:
      return {0};  // Q5_0, IQ4_NL, IQ4_XS
  }
}

// Every AVX2 dequantizer gives DequantizeRow's values bit for bit, on random
// bytes (every bit pattern of the quants and scales) with finite fp16 fields.
TEST(DequantRowAvx2Test, EqualsPortableBitwise) {
  if (!SetQuantDotIsa(QuantDotIsa::kAvx2)) {
    GTEST_SKIP() << "not supported: this CPU lacks AVX2";
  }
  SetQuantDotIsa(GetKernelPaths().quant_dot);
  std::mt19937 rng(3);
  int n_avx2 = 0;
  for (DType t : kTypes) {
    const cpu::DequantRowFn avx2 = cpu::DequantRowAvx2(t);
    if (avx2 == nullptr) continue;
    ++n_avx2;
    const int64_t n_blocks = 97, n = n_blocks * DTypeBlockElems(t);
    std::vector<uint8_t> bytes(RowBytes(t, n));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int off : HalfOffsets(t)) {
        uint16_t h = static_cast<uint16_t>(rng());
        if ((h >> 10 & 0x1f) == 0x1f) h &= 0xbfff;  // no Inf / NaN
        std::memcpy(bytes.data() + b * DTypeBlockBytes(t) + off, &h, 2);
      }
    }
    std::vector<float> want(n), got(n);
    cpu::DequantRowPortable(t)(bytes.data(), want.data(), n);
    avx2(bytes.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      ASSERT_EQ(a, b) << DTypeName(t) << " element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  RecordProperty("avx2_dequantizers", n_avx2);
}

}  // namespace
}  // namespace specd::kernels
