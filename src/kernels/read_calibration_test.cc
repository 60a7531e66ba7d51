#include "kernels/read_calibration.h"

#include <gtest/gtest.h>

namespace specd::kernels {
namespace {

// The measurement itself is machine-dependent; what must hold everywhere is
// that it ran, that the choice follows the stated rule, and that it is cached.
TEST(ReadCalibrationTest, ChoiceFollowsTheMeasuredRates) {
  const ReadCalibration& c = CalibrateStreamPrefetch();
  ASSERT_GT(c.plain_gbps, 0);
  ASSERT_GT(c.prefetch_gbps, 0);
  const bool faster = c.prefetch_gbps >= kPrefetchMinGain * c.plain_gbps;
  EXPECT_EQ(c.stream_prefetch, faster ? kStreamPrefetchBytes : 0);
  EXPECT_NE(c.Summary().find("GB/s"), std::string::npos) << c.Summary();
  EXPECT_EQ(&CalibrateStreamPrefetch(), &c);
}

}  // namespace
}  // namespace specd::kernels
