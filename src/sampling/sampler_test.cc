#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace specd {
namespace {

TEST(SamplerTest, GreedyPicksFirstMaximum) {
  float logits[] = {0.1f, 2.f, -1.f, 2.f};
  Sampler s(1);
  EXPECT_EQ(s.Sample(logits, 4, SamplingParams{}, 0), 1);
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

// The filters written the simplest way: sort every token by logit
// (descending, ties to the lower id), keep top_k, then the shortest prefix
// reaching top_p, then tokens at or above min_p times the largest.
std::vector<double> NaiveProbs(const std::vector<float>& logits, const SamplingParams& p) {
  const int V = static_cast<int>(logits.size());
  std::vector<int> idx(V);
  for (int i = 0; i < V; ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  int keep = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<double> e(V);
  double sum = 0;
  for (int i = 0; i < keep; ++i)
    sum += e[i] = std::exp((double(logits[idx[i]]) - logits[idx[0]]) / p.temperature);
  double acc = 0;
  for (int i = 0; i < keep && p.top_p < 1.f; ++i) {
    acc += e[i] / sum;
    if (acc >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  int k = 0;
  while (k < keep && e[k] >= p.min_p * e[0]) ++k;
  double kept = 0;
  for (int i = 0; i < k; ++i) kept += e[i];
  std::vector<double> out(V, 0.0);
  for (int i = 0; i < k; ++i) out[idx[i]] = e[i] / kept;
  return out;
}

TEST(SamplerTest, ProbsEqualTheSortedDefinition) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::uniform_int_distribution<int> coarse(-4, 4);  // repeated logits: ties
  for (int trial = 0; trial < 200; ++trial) {
    const int V = 1 + trial % 97;
    std::vector<float> logits(V);
    for (float& x : logits) x = trial % 2 ? normal(rng) : 0.5f * coarse(rng);
    SamplingParams sp;
    sp.temperature = 0.3f + 0.01f * (trial % 150);
    sp.top_k = trial % 3 == 0 ? 0 : 1 + trial % 11;
    sp.top_p = trial % 4 == 0 ? 1.f : 0.3f + 0.1f * (trial % 7);
    sp.min_p = trial % 5 == 0 ? 0.f : 0.02f * (trial % 9);
    std::vector<float> got;
    Sampler::Probs(logits.data(), V, sp, &got);
    const std::vector<double> want = NaiveProbs(logits, sp);
    for (int i = 0; i < V; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6) << "trial " << trial << " token " << i;
  }
}

TEST(SamplerTest, SameSeedSameTokensAndFrequenciesMatch) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams sp;
  sp.temperature = 1.f;
  Sampler a(42), b(42);
  std::map<int, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    int x = a.Sample(logits.data(), 3, sp, i);
    EXPECT_EQ(x, b.Sample(logits.data(), 3, sp, i));
    count[x]++;
  }
  // 5 sigma of a binomial with n = 20000.
  EXPECT_NEAR(count[0] / double(n), 0.5, 5 * std::sqrt(0.25 / n));
  EXPECT_NEAR(count[2] / double(n), 0.2, 5 * std::sqrt(0.16 / n));
}

// A token's draw is a function of (seed, position) alone: drawing positions
// in another order, more than once, or with other draws in between gives the
// same tokens; another seed gives other tokens.
TEST(SamplerTest, DrawDependsOnlyOnSeedAndPosition) {
  const int V = 50;
  std::vector<float> flat(V, 0.f);
  SamplingParams sp;
  sp.temperature = 1.f;
  Sampler forward(7);
  std::vector<int32_t> want(300);
  for (int pos = 0; pos < 300; ++pos) want[pos] = forward.Sample(flat.data(), V, sp, pos);
  Sampler scrambled(7);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> any(0, 299);
  for (int k = 0; k < 2000; ++k) {
    const int pos = any(rng);
    (void)scrambled.Uniform(any(rng));
    ASSERT_EQ(scrambled.Sample(flat.data(), V, sp, pos), want[pos]) << "position " << pos;
  }
  Sampler other(8);
  int same = 0;
  for (int pos = 0; pos < 300; ++pos) same += other.Sample(flat.data(), V, sp, pos) == want[pos];
  EXPECT_LT(same, 30) << "seeds 7 and 8 agree on " << same << " of 300 uniform draws over 50";
}

// Neighbouring seeds and positions give independent-looking uniforms: the
// mean, and the correlation of each uniform with the next position's and
// with the next seed's, over 40,000 draws.
TEST(SamplerTest, UniformsOfNeighbouringSeedsAndPositionsAreUncorrelated) {
  const int n = 40000;
  double sum = 0, next_pos = 0, next_seed = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t seed = static_cast<uint64_t>(i / 200);
    const int64_t pos = i % 200;
    const double u = Sampler(seed).Uniform(pos) - 0.5;
    sum += u;
    next_pos += u * (Sampler(seed).Uniform(pos + 1) - 0.5);
    next_seed += u * (Sampler(seed + 1).Uniform(pos) - 0.5);
  }
  // Each statistic has standard deviation 1/sqrt(12 n) (mean) or 1/(12
  // sqrt(n)) (products); 5 sigma.
  EXPECT_NEAR(sum / n, 0.0, 5 / std::sqrt(12.0 * n));
  EXPECT_NEAR(next_pos / n, 0.0, 5 / (12 * std::sqrt(double(n))));
  EXPECT_NEAR(next_seed / n, 0.0, 5 / (12 * std::sqrt(double(n))));
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
