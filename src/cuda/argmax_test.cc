// ArgmaxRowsF32 against a naive loop with GreedyToken's rule (the first index
// of the maximum); ties, -inf rows and NaN entries included.
#include "cuda/argmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cuda/cuda_test_util.h"

namespace specd::cuda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// First index of the largest non-NaN value; 0 when every value is NaN.
int32_t NaiveArgmax(const float* x, int n) {
  int32_t best = -1;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

// n_rows rows of `vocab`: random, then row r gets a twist so the batch covers
// the edge cases (ties, the maximum at the ends, -inf, NaN).
std::vector<float> Rows(int n_rows, int vocab, uint32_t seed) {
  std::vector<float> x = RandomVector(size_t(n_rows) * vocab, seed, -20.0f, 20.0f);
  for (int r = 0; r < n_rows; ++r) {
    float* row = x.data() + size_t(r) * vocab;
    switch (r % 6) {
      case 0:
        break;
      case 1:  // ties: the same maximum at three places
        row[vocab / 2] = row[vocab - 1] = row[vocab / 3] = 50.0f;
        break;
      case 2:  // the last entry
        row[vocab - 1] = 60.0f;
        break;
      case 3:  // only -inf: index 0
        for (int i = 0; i < vocab; ++i) row[i] = -kInf;
        break;
      case 4:  // NaNs are skipped, even ahead of the maximum
        row[0] = kNaN;
        row[vocab / 2] = kNaN;
        break;
      case 5:  // +0 and -0 compare equal: the first wins
        for (int i = 0; i < vocab; ++i) row[i] = -1.0f;
        row[vocab - 1] = 0.0f;
        row[vocab / 2] = -0.0f;
        break;
    }
  }
  return x;
}

TEST(CudaArgmaxReferenceTest, NaiveRuleOnTheEdgeRows) {
  const int vocab = 10;
  const std::vector<float> x = Rows(6, vocab, 3);
  EXPECT_EQ(NaiveArgmax(&x[1 * vocab], vocab), vocab / 3);
  EXPECT_EQ(NaiveArgmax(&x[2 * vocab], vocab), vocab - 1);
  EXPECT_EQ(NaiveArgmax(&x[3 * vocab], vocab), 0);
  EXPECT_EQ(NaiveArgmax(&x[5 * vocab], vocab), vocab / 2);
  const float nans[3] = {kNaN, kNaN, kNaN};
  EXPECT_EQ(NaiveArgmax(nans, 3), 0);
}

TEST_F(CudaKernelTest, ArgmaxMatchesScalarReference) {
  for (auto [n_rows, vocab] :
       {std::pair{1, 1}, {6, 7}, {12, 1000}, {6, 32000}, {3, 128256}, {2, 151936}}) {
    const std::vector<float> x = Rows(n_rows, vocab, 41 + vocab);
    auto dx = Upload(x);
    auto dout = NewDeviceBuffer(size_t(n_rows) * 4);
    ASSERT_TRUE(dx && dout.ok());
    if (n_rows == 1) {
      ASSERT_TRUE(ArgmaxF32(dx->as<float>(), vocab, (*dout)->as<int32_t>()).ok());
    } else {
      ASSERT_TRUE(ArgmaxRowsF32(dx->as<float>(), n_rows, vocab, (*dout)->as<int32_t>()).ok());
    }
    const std::vector<int32_t> got = Download<int32_t>(**dout, n_rows);
    for (int r = 0; r < n_rows; ++r) {
      EXPECT_EQ(got[r], NaiveArgmax(x.data() + size_t(r) * vocab, vocab))
          << "row " << r << " of " << n_rows << "x" << vocab;
    }
  }
}

TEST_F(CudaKernelTest, ArgmaxOfAllNaNRowIsZero) {
  const std::vector<float> x(300, kNaN);
  auto dx = Upload(x);
  auto dout = NewDeviceBuffer(4);
  ASSERT_TRUE(dx && dout.ok());
  ASSERT_TRUE(ArgmaxF32(dx->as<float>(), 300, (*dout)->as<int32_t>()).ok());
  EXPECT_EQ(Download<int32_t>(**dout, 1)[0], 0);
}

TEST(CudaArgmaxErrorTest, BadShapesAreRefusedBeforeAnyCudaCall) {
  const StatusCode want = ExpectedShapeError();
  const auto* x = reinterpret_cast<const float*>(uintptr_t{0x10000});
  auto* out = reinterpret_cast<int32_t*>(uintptr_t{0x20000});
  const Status empty = ArgmaxRowsF32(x, 2, 0, out);
  EXPECT_EQ(empty.code(), want);
  if (BuiltWithCuda()) {
    EXPECT_NE(empty.message().find("vocab_size 0"), std::string::npos) << empty.ToString();
  }
  EXPECT_EQ(ArgmaxRowsF32(x, -1, 10, out).code(), want);
  EXPECT_EQ(ArgmaxRowsF32(nullptr, 1, 10, out).code(), want);
  EXPECT_EQ(ArgmaxF32(x, 10, nullptr).code(), want);
  if (BuiltWithCuda()) {
    EXPECT_TRUE(ArgmaxRowsF32(nullptr, 0, 10, nullptr).ok());
  }
}

}  // namespace
}  // namespace specd::cuda
