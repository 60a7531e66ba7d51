#include "sampling/logits_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/sampler.h"

namespace specd {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Independent reference: the definition, one std:: predicate at a time.
bool Usable(const std::vector<float>& row) {
  bool any_above = false;
  for (float x : row) {
    if (std::isnan(x) || x == kInf) return false;
    any_above |= x > -kInf;
  }
  return any_above;
}

TEST(LogitsCheckTest, FiniteRowsAndMaskedTokensPass) {
  std::vector<float> row = {0.5f, -3.f, 1e30f, -1e30f, 0.f, -0.f};
  EXPECT_TRUE(CheckLogitsRow(row.data(), static_cast<int>(row.size())).ok());
  row[1] = -kInf;  // a forbidden token is legal
  EXPECT_TRUE(CheckLogitsRow(row.data(), static_cast<int>(row.size())).ok());
  const float denormal = std::numeric_limits<float>::denorm_min();
  row[2] = denormal;
  EXPECT_TRUE(CheckLogitsRow(row.data(), static_cast<int>(row.size())).ok());
}

TEST(LogitsCheckTest, NamesNaNInfAndAllMasked) {
  for (int V : {1, 7, 16, 33, 32000}) {
    for (int at : {0, V / 2, V - 1}) {
      std::vector<float> row(V, 0.25f);
      row[at] = kNaN;
      Status s = CheckLogitsRow(row.data(), V);
      ASSERT_FALSE(s.ok()) << "V=" << V << " at=" << at;
      EXPECT_EQ(s.code(), StatusCode::kInternal);
      EXPECT_EQ(s.message(), "contain NaN (token " + std::to_string(at) + ")");

      row[at] = kInf;
      s = CheckLogitsRow(row.data(), V);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.message(), "contain +Inf (token " + std::to_string(at) + ")");
    }
    // Unchecked, an all-NaN row (one NaN weight reaches every logit) is
    // token 0 to argmax, step after step: the failure this check prevents.
    std::vector<float> all_nan(V, kNaN);
    EXPECT_EQ(GreedyToken(all_nan.data(), V), 0);
    EXPECT_EQ(CheckLogitsRow(all_nan.data(), V).message(), "contain NaN (token 0)");
    std::vector<float> masked(V, -kInf);
    Status s = CheckLogitsRow(masked.data(), V);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(), "are all -inf");
    masked[V - 1] = -1e30f;
    EXPECT_TRUE(CheckLogitsRow(masked.data(), V).ok());
  }
}

TEST(LogitsCheckTest, AgreesWithTheDefinitionOnRandomRows) {
  const float specials[] = {kNaN, -kNaN, kInf, -kInf, 0.f, 1.f, -1e38f};
  uint32_t h = 12345;
  auto next = [&h] { return h = h * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 2000; ++trial) {
    const int V = 1 + static_cast<int>(next() % 40);
    std::vector<float> row(V);
    for (float& x : row) {
      const uint32_t r = next();
      x = (r >> 8) % 4 == 0 ? specials[(r >> 12) % 7] : -kInf;
    }
    ASSERT_EQ(CheckLogitsRow(row.data(), V).ok(), Usable(row)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace specd
