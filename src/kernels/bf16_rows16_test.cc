// BF16 matrices repacked into 16-row groups (RepackForMatMul): MatMul over the
// repacked bytes equals MatMul over the original rows bit for bit on the
// AVX512-BF16 path, the portable kernel follows the same summation order, and
// both are close to a double-precision product.
#include "kernels/cpu/bf16_rows16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"

namespace specd::kernels {
namespace {

constexpr int kTokens[] = {1, 2, 3, 4, 5, 9, 16};

// Odd pair counts and partial last vectors (cols % 32 != 0) included.
struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{16, 2},    {16, 32},  {32, 18},  {48, 160}, {16, 50},
                             {160, 432}, {64, 480}, {96, 100}, {32, 2048}};

bool HaveAvx512Bf16Path() {
  EnsureKernelPathsInitialized();
  return ActiveBf16Path() == Bf16DotPath::kAvx512Bf16 && cpu::Bf16Rows16Avx512() != nullptr;
}

std::string Trace(const Shape& s, int n_tokens) {
  return "rows=" + std::to_string(s.rows) + " cols=" + std::to_string(s.cols) +
         " n_tokens=" + std::to_string(n_tokens);
}

class Bf16Rows16Test : public testing::Test {
 protected:
  void SetUp() override { SetRepack(true); }
  void TearDown() override {
    SetMatMulSplit(MatMulSplit::kDynamic);
    ResetRepack();
  }
};

TEST_F(Bf16Rows16Test, EqualsTheRowLayoutBitwise) {
  if (!HaveAvx512Bf16Path()) {
    GTEST_SKIP() << "not supported: this CPU lacks AVX512-BF16 (flags: "
                 << GetCpuFeatures().FlagString() << ")";
  }
  ThreadPool pool(3);
  for (MatMulSplit split : {MatMulSplit::kDynamic, MatMulSplit::kStatic}) {
    SetMatMulSplit(split);
    for (const Shape& s : kShapes) {
      Weights m = MakeWeights(DType::kBF16, s.rows, s.cols, static_cast<uint32_t>(s.rows + s.cols));
      TensorView orig = m.view;
      std::vector<uint8_t> orig_bytes = m.bytes;
      orig.data = orig_bytes.data();
      ASSERT_TRUE(RepackForMatMul(&m.view, m.bytes.data()));
      ASSERT_EQ(m.view.layout, WeightLayout::kRows16);
      if (s.cols > 2) {
        ASSERT_NE(m.bytes, orig_bytes);
      }
      for (int n_tokens : kTokens) {
        SCOPED_TRACE(Trace(s, n_tokens));
        std::vector<float> x = MakeActs(n_tokens, s.cols, static_cast<uint32_t>(n_tokens * 3));
        std::vector<float> y(n_tokens * s.rows), y_pool(n_tokens * s.rows),
            y_ref(n_tokens * s.rows);
        MatMul(orig, x.data(), n_tokens, y_ref.data(), nullptr);
        MatMul(m.view, x.data(), n_tokens, y.data(), nullptr);
        MatMul(m.view, x.data(), n_tokens, y_pool.data(), &pool);
        ASSERT_EQ(0, std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)));
        ASSERT_EQ(0, std::memcmp(y_pool.data(), y_ref.data(), y.size() * sizeof(float)));
        // A token alone gives the bits it gets in the batch.
        std::vector<float> y_last(s.rows);
        MatMul(m.view, x.data() + (n_tokens - 1) * s.cols, 1, y_last.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(y_last.data(), y.data() + (n_tokens - 1) * s.rows,
                                 y_last.size() * sizeof(float)));
      }
    }
  }
}

// Row ranges on and off the 16-row grid give the rows of the whole product.
TEST_F(Bf16Rows16Test, RowRangesGiveTheirRowsOfTheWholeProduct) {
  if (!HaveAvx512Bf16Path()) GTEST_SKIP() << "not supported: this CPU lacks AVX512-BF16";
  const int64_t rows = 96, cols = 160;
  Weights m = MakeWeights(DType::kBF16, rows, cols, 5);
  ASSERT_TRUE(RepackForMatMul(&m.view, m.bytes.data()));
  for (int n_tokens : {1, 3}) {
    std::vector<float> x = MakeActs(n_tokens, cols, 11);
    std::vector<float> full(n_tokens * rows);
    MatMul(m.view, x.data(), n_tokens, full.data(), nullptr);
    for (auto [r0, r1] :
         {std::pair<int64_t, int64_t>{16, 48}, {5, 37}, {0, 1}, {80, 96}, {33, 34}}) {
      SCOPED_TRACE("rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ")");
      const int64_t n = r1 - r0;
      std::vector<float> y(n_tokens * n);
      MatMulRows(m.view, r0, r1, x.data(), n_tokens, y.data(), nullptr);
      for (int t = 0; t < n_tokens; ++t) {
        ASSERT_EQ(0, std::memcmp(y.data() + t * n, full.data() + t * rows + r0, n * sizeof(float)));
      }
    }
  }
}

// bf16 activations as the kernels take them (ldx a multiple of 32).
std::vector<uint16_t> Bf16Acts(const std::vector<float>& x, int n_tokens, int64_t k, int64_t ldx) {
  std::vector<uint16_t> xb(n_tokens * ldx);
  for (int t = 0; t < n_tokens; ++t) {
    cpu::ConvertToBF16Scalar(x.data() + t * k, k, ldx, xb.data() + t * ldx);
  }
  return xb;
}

// The portable kernel against a double-precision product of the same bf16
// values (any CPU), and against the AVX512-BF16 kernel bit for bit (the
// summation order both implement; normal numbers only).
TEST_F(Bf16Rows16Test, PortableKernelFollowsTheSummationOrder) {
  for (const Shape& s : kShapes) {
    Weights m = MakeWeights(DType::kBF16, s.rows, s.cols, static_cast<uint32_t>(s.cols));
    std::vector<uint8_t> packed = m.bytes;
    cpu::RepackBf16Rows16(packed.data(), s.rows, s.cols);
    const int64_t ldx = (s.cols + 31) / 32 * 32;
    for (int n_tokens : {1, 2, 5}) {
      SCOPED_TRACE(Trace(s, n_tokens));
      std::vector<float> x = MakeActs(n_tokens, s.cols, 7);
      std::vector<uint16_t> xb = Bf16Acts(x, n_tokens, s.cols, ldx);
      std::vector<float> y(n_tokens * s.rows);
      cpu::Bf16Rows16Scalar(packed.data(), s.rows / 16, s.cols, xb.data(), ldx, n_tokens, y.data(),
                            s.rows, false);
      for (int t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < s.rows; ++r) {
          double ref = 0, mag = 0;
          for (int64_t j = 0; j < s.cols; ++j) {
            uint32_t u = static_cast<uint32_t>(xb[t * ldx + j]) << 16;
            float xv;
            std::memcpy(&xv, &u, 4);
            ref += static_cast<double>(m.deq[r * s.cols + j]) * xv;
            mag += std::fabs(static_cast<double>(m.deq[r * s.cols + j]) * xv);
          }
          ASSERT_NEAR(y[t * s.rows + r], ref, 1e-6 * mag + 1e-30) << "row " << r << " token " << t;
        }
      }
      if (HaveAvx512Bf16Path()) {
        std::vector<float> y_avx(n_tokens * s.rows);
        cpu::Bf16Rows16Avx512()(packed.data(), s.rows / 16, s.cols, xb.data(), ldx, n_tokens,
                                y_avx.data(), s.rows, true);
        ASSERT_EQ(0, std::memcmp(y.data(), y_avx.data(), y.size() * sizeof(float)));
      }
    }
  }
}

TEST_F(Bf16Rows16Test, RepacksOnlyWhatItsKernelsRead) {
  if (!HaveAvx512Bf16Path()) {
    // Without the AVX512-BF16 path a BF16 matrix keeps its rows even when
    // repacking is forced: the portable row kernel sums in another order.
    Weights m = MakeWeights(DType::kBF16, 32, 64, 1);
    EXPECT_FALSE(WantsRepackForMatMul(m.view));
    return;
  }
  EXPECT_TRUE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 64, 1).view));
  EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 24, 64, 1).view));  // rows % 16
  EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 63, 1).view));  // odd cols
  EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kF16, 32, 64, 1).view));
  EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kF32, 32, 64, 1).view));
  Weights m = MakeWeights(DType::kBF16, 32, 64, 1);
  ASSERT_TRUE(RepackForMatMul(&m.view, m.bytes.data()));
  EXPECT_FALSE(RepackForMatMul(&m.view, m.bytes.data()));  // not twice
  SetRepack(false);
  EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 64, 1).view));
}

}  // namespace
}  // namespace specd::kernels
