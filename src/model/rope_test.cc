#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/tiny_llama_test_util.h"

namespace specd {
namespace {

using model_test::NaiveInvFreq;

ModelConfig RopeConfig(int head_dim, float theta, const std::string& type) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = theta;
  c.rope_scaling.type = type;
  c.rope_scaling.factor = 8.f;
  c.rope_scaling.low_freq_factor = 1.f;
  c.rope_scaling.high_freq_factor = 4.f;
  c.rope_scaling.original_max_position = 8192;
  return c;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << "pair " << i;
}

TEST(RopeTest, UnscaledIsThetaPowers) {
  for (int hd : {8, 64, 128}) {
    for (float theta : {10000.f, 500000.f, 1000000.f}) {
      SCOPED_TRACE(testing::Message() << "head_dim " << hd << " theta " << theta);
      ModelConfig c = RopeConfig(hd, theta, "");
      ExpectNear(RopeInvFreq(c), NaiveInvFreq(hd, theta, "", 1, 1, 4, 8192));
      EXPECT_EQ(RopeInvFreq(c)[0], 1.f);
    }
  }
}

TEST(RopeTest, LinearDividesEveryFrequency) {
  ModelConfig c = RopeConfig(64, 10000.f, "linear");
  c.rope_scaling.factor = 4.f;
  std::vector<float> plain = RopeInvFreq(RopeConfig(64, 10000.f, ""));
  std::vector<float> got = RopeInvFreq(c);
  ExpectNear(got, NaiveInvFreq(64, 10000, "linear", 4, 1, 4, 8192));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i] * 4.f, plain[i]);
}

TEST(RopeTest, Llama3ScalingMatchesReferenceAndItsThreeBands) {
  // Llama 3.1 settings: theta 500000, factor 8, low 1, high 4, original 8192.
  ModelConfig c = RopeConfig(128, 500000.f, "llama3");
  std::vector<float> got = RopeInvFreq(c);
  std::vector<float> plain = RopeInvFreq(RopeConfig(128, 500000.f, ""));
  ExpectNear(got, NaiveInvFreq(128, 500000, "llama3", 8, 1, 4, 8192));
  int kept = 0, divided = 0, ramp = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 8192 / 4.0) {
      EXPECT_FLOAT_EQ(got[i], plain[i]) << "high frequencies are kept";
      ++kept;
    } else if (wavelen > 8192 / 1.0) {
      EXPECT_FLOAT_EQ(got[i], plain[i] / 8) << "low frequencies are divided by factor";
      ++divided;
    } else {
      EXPECT_LT(got[i], plain[i]);
      EXPECT_GT(got[i], plain[i] / 8);
      ++ramp;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(ramp, 0);
  // The loader's GGUF representation (rope_freqs.weight divisors) describes
  // the same frequencies.
  std::vector<float> factors = Llama3RopeFreqFactors(128, 500000.f, c.rope_scaling);
  ASSERT_EQ(factors.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(plain[i] / factors[i], got[i], 1e-5 * got[i]) << "pair " << i;
}

}  // namespace
}  // namespace specd
