// BF16 matrices repacked into 16-row groups (RepackForMatMul), on every
// kernel path this CPU runs (kernel_paths_test_util.h) and in both
// batch-invariance modes. The contract (dispatch.h, RepackEnabled):
// - AVX512-BF16 path, AMX-BF16 tiles not taking the file layout's products:
//   the matrix is repacked, and MatMul over the groups equals MatMul over the
//   file's rows bit for bit (any token count, pool or not, any row range); a
//   token alone gets the bits it gets in a batch.
// - AMX on with AMX-BF16, not batch-invariant, cols % 32 == 0 (the tiles take
//   the file rows' many-token products, in another summation order), and the
//   portable path: the matrix keeps its rows even when repacking is forced.
// The portable group kernel follows the AVX512-BF16 summation order, and both
// are close to a double-precision product.
#include "kernels/cpu/bf16_rows16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/bf16_amx.h"
#include "kernels/dispatch.h"
#include "kernels/kernel_paths_test_util.h"
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

// The contract above: whether a BF16 matrix of `cols` columns (rows % 16 == 0)
// is repacked under the active paths when repacking is forced.
bool ContractRepacks(int64_t cols) {
  if (cols % 2 != 0 || !HaveAvx512Bf16Path()) return false;
  const bool tiles = AmxActive() && GetCpuFeatures().amx_bf16 && cpu::HaveBf16Amx() &&
                     !BatchInvariantEnabled() && cols % 32 == 0;
  return !tiles;
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
    SetBatchInvariant(false);
    ResetRepack();
  }
  // Runs `body` under every kernel path of this CPU and both batch-invariance
  // modes, with a trace naming them.
  template <typename Body>
  void ForEachPath(Body body) {
    for (const KernelPathCase& c : KernelPathCasesOfThisCpu()) {
      ScopedKernelPaths paths(c.paths);
      ASSERT_TRUE(paths.ok()) << c.name;
      for (bool invariant : {false, true}) {
        SetBatchInvariant(invariant);
        SCOPED_TRACE("path " + c.name + (invariant ? ", batch-invariant" : ""));
        body();
        if (HasFatalFailure()) return;
      }
    }
  }
};

TEST_F(Bf16Rows16Test, EqualsTheRowLayoutBitwise) {
  ThreadPool pool(3);
  int n_compared = 0;
  ForEachPath([&] {
    for (MatMulSplit split : {MatMulSplit::kDynamic, MatMulSplit::kStatic}) {
      SetMatMulSplit(split);
      for (const Shape& s : kShapes) {
        Weights m =
            MakeWeights(DType::kBF16, s.rows, s.cols, static_cast<uint32_t>(s.rows + s.cols));
        TensorView orig = m.view;
        std::vector<uint8_t> orig_bytes = m.bytes;
        orig.data = orig_bytes.data();
        if (!ContractRepacks(s.cols)) {
          ASSERT_FALSE(RepackForMatMul(&m.view, m.bytes.data())) << Trace(s, 0);
          ASSERT_EQ(m.view.layout, WeightLayout::kRows);
          ASSERT_EQ(m.bytes, orig_bytes);
          continue;
        }
        ASSERT_TRUE(RepackForMatMul(&m.view, m.bytes.data())) << Trace(s, 0);
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
          ++n_compared;
        }
      }
    }
  });
  if (cpu::Bf16Rows16Avx512() != nullptr && GetCpuFeatures().avx512_bf16) {
    EXPECT_GT(n_compared, 0) << "the AVX512-BF16 path never repacked";
  }
}

// Row ranges on and off the 16-row grid give the rows of the whole product.
TEST_F(Bf16Rows16Test, RowRangesGiveTheirRowsOfTheWholeProduct) {
  const int64_t rows = 96, cols = 160;
  ForEachPath([&] {
    Weights m = MakeWeights(DType::kBF16, rows, cols, 5);
    ASSERT_EQ(RepackForMatMul(&m.view, m.bytes.data()), ContractRepacks(cols));
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
          ASSERT_EQ(0,
                    std::memcmp(y.data() + t * n, full.data() + t * rows + r0, n * sizeof(float)));
        }
      }
    }
  });
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
  ForEachPath([&] {
    EXPECT_EQ(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 64, 1).view),
              ContractRepacks(64));
    EXPECT_EQ(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 50, 1).view),
              ContractRepacks(50));
    EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 24, 64, 1).view));  // rows % 16
    EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 63, 1).view));  // odd cols
    EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kF16, 32, 64, 1).view));
    EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kF32, 32, 64, 1).view));
    Weights m = MakeWeights(DType::kBF16, 32, 64, 1);
    EXPECT_EQ(RepackForMatMul(&m.view, m.bytes.data()), ContractRepacks(64));
    EXPECT_FALSE(RepackForMatMul(&m.view, m.bytes.data()));  // not twice
    SetRepack(false);
    EXPECT_FALSE(WantsRepackForMatMul(MakeWeights(DType::kBF16, 32, 64, 1).view));
    SetRepack(true);
  });
}

}  // namespace
}  // namespace specd::kernels
