// Token sampling: greedy, temperature, top-k, top-p (nucleus), min-p, with
// position-keyed randomness.
//
// The uniform that draws the token at sequence position P (the number of
// tokens before it, prompt included) is a hash of (seed, P) and nothing else:
// no RNG state advances between draws. The token is the inverse CDF of the
// filtered distribution at that uniform, walking tokens in id order. So a
// request's token at P depends only on its seed, P and the logits row that
// predicts P: the same whether P is decoded alone, in a batch, after a
// different number of earlier draws, or as a node of a verified draft tree
// (spec/verify.h uses the same draw, which makes seeded speculative sampling
// equal seeded plain sampling, token for token, for any draft shape).
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
  explicit Sampler(uint64_t seed) : seed_(seed) {}

  // The filtered, renormalized distribution over V tokens (sparse: zeros for
  // filtered tokens). For greedy params: a one-hot at the argmax.
  static void Probs(const float* logits, int V, const SamplingParams& p, std::vector<float>* probs);
  // The token at sequence position `position`, from the row of logits that
  // predicts it. Greedy params: the argmax (no randomness).
  int32_t Sample(const float* logits, int V, const SamplingParams& p, int64_t position);
  // The token at `position` drawn from an explicit distribution (sums to ~1)
  // with the uniform Sample uses there.
  int32_t SampleFrom(const std::vector<float>& probs, int64_t position) const;
  // The uniform in [0, 1) for the token at `position`.
  double Uniform(int64_t position) const;

 private:
  uint64_t seed_;
  std::vector<float> scratch_;
};

}  // namespace specd
