// Q4_0 / Q8_0 matrices repacked into 16-row groups (RepackForMatMul): on
// every quantized path this CPU runs (AMX-INT8 tiles on and off), MatMul
// over the repacked bytes equals the summation-order reference over the
// original GGUF rows bit for bit.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"

namespace specd::kernels {
namespace {

struct Rows16Case {
  QuantDotIsa isa;
  DType dtype;
  bool amx = false;  // AMX-INT8 tiles on (avx512vnni only)
};

class Rows16Test : public testing::TestWithParam<Rows16Case> {
 protected:
  void SetUp() override {
    if (!SetQuantDotIsa(GetParam().isa)) {
      GTEST_SKIP() << "not supported: this CPU lacks " << QuantDotIsaName(GetParam().isa)
                   << " (flags: " << GetCpuFeatures().FlagString() << ")";
    }
    if (!SetAmx(GetParam().amx)) {
      GTEST_SKIP() << "not supported: AMX-INT8 tiles unavailable (" << GetKernelPaths().amx_reason
                   << ")";
    }
    ASSERT_EQ(AmxActive(), GetParam().amx);
    SetRepack(true);
  }
  void TearDown() override {
    SetQuantDotIsa(GetKernelPaths().quant_dot);
    SetAmx(GetKernelPaths().amx_int8);
    SetMatMulSplit(MatMulSplit::kDynamic);
    ResetRepack();
  }
};

TEST_P(Rows16Test, EqualsSummationOrderReferenceBitwise) {
  ThreadPool pool(3);
  for (MatMulSplit split : {MatMulSplit::kDynamic, MatMulSplit::kStatic}) {
    SetMatMulSplit(split);
    for (int64_t cols : {32, 96, 160, 2048}) {
      for (int64_t rows : {16, 48, 112}) {
        Weights m =
            MakeWeights(GetParam().dtype, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
        TensorView orig = m.view;
        std::vector<uint8_t> orig_bytes = m.bytes;
        orig.data = orig_bytes.data();
        ASSERT_TRUE(RepackForMatMul(&m.view, m.bytes.data()));
        ASSERT_EQ(m.view.layout, WeightLayout::kRows16);
        ASSERT_NE(m.bytes, orig_bytes);
        for (int n_tokens : {1, 2, 3, 4, 5, 8, 9, 16}) {
          SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                       " n_tokens=" + std::to_string(n_tokens) +
                       (split == MatMulSplit::kStatic ? " static" : " dynamic"));
          std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens + cols));
          std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows), y_ref(n_tokens * rows);
          MatMul(m.view, x.data(), n_tokens, y.data(), nullptr);
          MatMul(m.view, x.data(), n_tokens, y_pool.data(), &pool);
          ref::MatMulQuantizedActsInOrder(orig, 0, rows, x.data(), n_tokens, y_ref.data());
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_EQ(y[i], y_ref[i]) << "t=" << i / rows << " r=" << i % rows;
            ASSERT_EQ(y_pool[i], y_ref[i]) << "t=" << i / rows << " r=" << i % rows;
          }
          // Row ranges of the repacked matrix: on the 16-row grid (a
          // vocab-parallel head's range) and off it.
          for (auto [r0, r1] : {std::pair<int64_t, int64_t>{16, rows - 16}, {3, rows - 5},
                                {17, 18}}) {
            if (r1 <= r0 || r1 > rows) continue;
            const int64_t n = r1 - r0;
            std::vector<float> ys(n_tokens * n), ys_ref(n_tokens * n);
            MatMulRows(m.view, r0, r1, x.data(), n_tokens, ys.data(), &pool);
            ref::MatMulQuantizedActsInOrder(orig, r0, r1, x.data(), n_tokens, ys_ref.data());
            ASSERT_EQ(ys, ys_ref) << "rows [" << r0 << ", " << r1 << ")";
          }
        }
      }
    }
  }
}

TEST_P(Rows16Test, RepacksOnlyWhatItCanRead) {
  const DType dtype = GetParam().dtype;
  Weights odd_rows = MakeWeights(dtype, 40, 64, 1);
  EXPECT_FALSE(RepackForMatMul(&odd_rows.view, odd_rows.bytes.data()));
  EXPECT_EQ(odd_rows.view.layout, WeightLayout::kRows);

  Weights m = MakeWeights(dtype, 32, 64, 2);
  TensorView f16 = m.view;
  f16.dtype = DType::kF16;
  f16.shape = {16, 64};
  EXPECT_FALSE(RepackForMatMul(&f16, m.bytes.data()));
  TensorView q4bf16 = m.view;
  q4bf16.dtype = DType::kQ4_BF16;
  EXPECT_FALSE(RepackForMatMul(&q4bf16, m.bytes.data()));

  ASSERT_TRUE(RepackForMatMul(&m.view, m.bytes.data()));
  const std::vector<uint8_t> once = m.bytes;
  EXPECT_FALSE(RepackForMatMul(&m.view, m.bytes.data())) << "repacked twice";
  EXPECT_EQ(m.bytes, once);

  SetRepack(false);
  Weights off = MakeWeights(dtype, 32, 64, 3);
  EXPECT_FALSE(WantsRepackForMatMul(off.view));
  EXPECT_FALSE(RepackForMatMul(&off.view, off.bytes.data()));
}

INSTANTIATE_TEST_SUITE_P(
    AllPaths, Rows16Test,
    testing::Values(Rows16Case{QuantDotIsa::kScalar, DType::kQ4_0},
                    Rows16Case{QuantDotIsa::kScalar, DType::kQ8_0},
                    Rows16Case{QuantDotIsa::kAvx2, DType::kQ4_0},
                    Rows16Case{QuantDotIsa::kAvx2, DType::kQ8_0},
                    Rows16Case{QuantDotIsa::kAvxVnni, DType::kQ4_0},
                    Rows16Case{QuantDotIsa::kAvxVnni, DType::kQ8_0},
                    Rows16Case{QuantDotIsa::kAvx512Vnni, DType::kQ4_0},
                    Rows16Case{QuantDotIsa::kAvx512Vnni, DType::kQ8_0},
                    Rows16Case{QuantDotIsa::kAvx512Vnni, DType::kQ4_0, true},
                    Rows16Case{QuantDotIsa::kAvx512Vnni, DType::kQ8_0, true}),
    [](const testing::TestParamInfo<Rows16Case>& info) {
      return std::string(info.param.amx ? "amx" : QuantDotIsaName(info.param.isa)) + "_" +
             DTypeName(info.param.dtype);
    });

}  // namespace
}  // namespace specd::kernels
