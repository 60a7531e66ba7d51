// Token sampling: greedy, temperature, top-k, top-p (nucleus), min-p, with a
// seeded RNG (same seed, same logits → same tokens).
//
// Filters apply in this order to p = softmax(logits / temperature):
// top-k (keep the k most likely), top-p (keep the smallest prefix of the
// sorted tokens whose mass reaches top_p), min-p (drop tokens below
// min_p · max p), then renormalize. temperature == 0 means greedy (argmax).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace specd {

struct SamplingParams {
  float temperature = 0.f;  // 0: greedy
  int top_k = 0;            // 0: off
  float top_p = 1.f;        // 1: off
  float min_p = 0.f;        // 0: off
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.f; }
  // Names the offending field: "temperature must be >= 0, got -1".
  Status Validate() const;
};

// The greedy token: the first index of the largest logit (vectorized; the
// plain sampler and speculative verification both call this, so they agree
// on ties).
int32_t GreedyToken(const float* logits, int V);

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : state_(seed ^ 0x9E3779B97F4A7C15ull) {}

  // The filtered, renormalized distribution over V tokens (sparse: zeros for
  // filtered tokens). For greedy params: a one-hot at the argmax.
  static void Probs(const float* logits, int V, const SamplingParams& p, std::vector<float>* probs);
  // Draws a token. Greedy params never touch the RNG.
  int32_t Sample(const float* logits, int V, const SamplingParams& p);
  // Draws from an explicit distribution (sums to ~1).
  int32_t SampleFrom(const std::vector<float>& probs);
  // Uniform in [0, 1).
  double Uniform();

 private:
  uint64_t Next();  // splitmix64
  uint64_t state_;
  std::vector<float> scratch_;
};

}  // namespace specd
