#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace specd {
namespace {

TEST(SamplerTest, GreedyPicksFirstMaximum) {
  float logits[] = {0.1f, 2.f, -1.f, 2.f};
  Sampler s(1);
  EXPECT_EQ(s.Sample(logits, 4, SamplingParams{}), 1);
}

TEST(SamplerTest, GreedyTokenIsTheFirstMaximumAtVocabularySizes) {
  // Against a scalar scan, on sizes around the vector width and a real
  // vocabulary, with the maximum repeated (ties go to the lowest index).
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-50, 50);
  for (int V : {1, 2, 15, 16, 17, 33, 1000, 128256}) {
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<float> logits(V);
      for (float& x : logits) x = 0.25f * small(rng);
      int want = 0;
      for (int i = 1; i < V; ++i)
        if (logits[i] > logits[want]) want = i;
      ASSERT_EQ(GreedyToken(logits.data(), V), want) << "V=" << V;
    }
  }
}

TEST(SamplerTest, FiltersFollowTheirDefinitions) {
  // softmax of log(p) at temperature 1 is p itself.
  std::vector<float> p = {0.4f, 0.3f, 0.2f, 0.07f, 0.03f};
  std::vector<float> logits;
  for (float x : p) logits.push_back(std::log(x));
  std::vector<float> probs;
  SamplingParams sp;
  sp.temperature = 1.f;
  sp.top_k = 2;
  Sampler::Probs(logits.data(), 5, sp, &probs);
  EXPECT_NEAR(probs[0], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(probs[1], 0.3 / 0.7, 1e-6);
  EXPECT_EQ(probs[2], 0.f);
  sp.top_k = 0;
  sp.top_p = 0.85f;  // 0.4 + 0.3 + 0.2 = 0.9 >= 0.85: keep 3
  Sampler::Probs(logits.data(), 5, sp, &probs);
  EXPECT_NEAR(probs[2], 0.2 / 0.9, 1e-6);
  EXPECT_EQ(probs[3], 0.f);
  sp.top_p = 1.f;
  sp.min_p = 0.45f;  // keep p >= 0.18
  Sampler::Probs(logits.data(), 5, sp, &probs);
  EXPECT_NEAR(probs[2], 0.2 / 0.9, 1e-6);
  EXPECT_EQ(probs[3], 0.f);
}

TEST(SamplerTest, SameSeedSameTokensAndFrequenciesMatch) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams sp;
  sp.temperature = 1.f;
  Sampler a(42), b(42);
  std::map<int, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    int x = a.Sample(logits.data(), 3, sp);
    EXPECT_EQ(x, b.Sample(logits.data(), 3, sp));
    count[x]++;
  }
  // 5 sigma of a binomial with n = 20000.
  EXPECT_NEAR(count[0] / double(n), 0.5, 5 * std::sqrt(0.25 / n));
  EXPECT_NEAR(count[2] / double(n), 0.2, 5 * std::sqrt(0.16 / n));
}

TEST(SamplerTest, ValidateNamesTheField) {
  SamplingParams sp;
  sp.temperature = -1;
  EXPECT_NE(sp.Validate().message().find("temperature"), std::string::npos);
  sp.temperature = 1;
  sp.top_p = 0;
  EXPECT_NE(sp.Validate().message().find("top_p"), std::string::npos);
}

}  // namespace
}  // namespace specd
