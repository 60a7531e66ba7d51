#include "base/sample_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace specd {
namespace {

TEST(SummarizeTest, OrderStatisticsMatchNumpy) {
  // numpy.percentile([3, 1, 4, 1, 5], [25, 50, 75]) = [1, 3, 4]
  Summary s = Summarize({3, 1, 4, 1, 5});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.q1, 1);
  EXPECT_DOUBLE_EQ(s.q3, 4);
  // Even count: numpy.percentile([10, 20, 30, 40], [25, 50, 75]) = [17.5, 25, 32.5]
  s = Summarize({40, 10, 30, 20});
  EXPECT_DOUBLE_EQ(s.median, 25);
  EXPECT_DOUBLE_EQ(s.q1, 17.5);
  EXPECT_DOUBLE_EQ(s.q3, 32.5);
  EXPECT_EQ(Summarize({}).n, 0);
}

TEST(StudentT95Test, KnownQuantiles) {
  EXPECT_NEAR(StudentT95(1), 12.706, 1e-3);
  EXPECT_NEAR(StudentT95(4), 2.776, 1e-3);
  EXPECT_NEAR(StudentT95(40), 2.021, 2e-3);   // scipy.stats.t.ppf(0.975, 40)
  EXPECT_NEAR(StudentT95(120), 1.980, 2e-3);  // scipy.stats.t.ppf(0.975, 120)
}

TEST(PairedRatioTest, IntervalOnLogRatios) {
  // Ratios 2, 2.2, 1.8: log mean and sample sd computed by hand.
  std::vector<double> a = {10, 10, 10}, b = {20, 22, 18};
  RatioInterval r = PairedRatio(a, b);
  const double l1 = std::log(2.0), l2 = std::log(2.2), l3 = std::log(1.8);
  const double m = (l1 + l2 + l3) / 3;
  const double sd = std::sqrt(((l1 - m) * (l1 - m) + (l2 - m) * (l2 - m) + (l3 - m) * (l3 - m)) / 2);
  const double half = 4.303 * sd / std::sqrt(3.0);
  ASSERT_TRUE(r.has_interval);
  EXPECT_NEAR(r.ratio, std::exp(m), 1e-12);
  EXPECT_NEAR(r.low, std::exp(m - half), 1e-9);
  EXPECT_NEAR(r.high, std::exp(m + half), 1e-9);
  EXPECT_LT(r.low, 2.0);
  EXPECT_GT(r.high, 2.0);
}

TEST(PairedRatioTest, DriftCancelsWhenRatioIsConstant) {
  // The machine slows down round by round, but B is always 1.5x A.
  RatioInterval r = PairedRatio({100, 80, 60}, {150, 120, 90});
  EXPECT_NEAR(r.ratio, 1.5, 1e-12);
  EXPECT_NEAR(r.low, 1.5, 1e-12);
  EXPECT_NEAR(r.high, 1.5, 1e-12);
}

TEST(PairedRatioTest, OneRoundHasNoInterval) {
  RatioInterval r = PairedRatio({10}, {5});
  EXPECT_FALSE(r.has_interval);
  EXPECT_DOUBLE_EQ(r.ratio, 0.5);
}

}  // namespace
}  // namespace specd
