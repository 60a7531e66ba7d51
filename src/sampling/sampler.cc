#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ops.h"

namespace specd {

Status SamplingParams::Validate() const {
  if (!(temperature >= 0.f) || !std::isfinite(temperature))
    return InvalidArgumentError("temperature must be a finite number >= 0, got " +
                                std::to_string(temperature));
  if (top_k < 0) return InvalidArgumentError("top_k must be >= 0, got " + std::to_string(top_k));
  if (!(top_p > 0.f && top_p <= 1.f))
    return InvalidArgumentError("top_p must be in (0, 1], got " + std::to_string(top_p));
  if (!(min_p >= 0.f && min_p <= 1.f))
    return InvalidArgumentError("min_p must be in [0, 1], got " + std::to_string(min_p));
  return Status::Ok();
}

uint64_t Sampler::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Sampler::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

void Sampler::Probs(const float* logits, int V, const SamplingParams& p,
                    std::vector<float>* probs) {
  probs->assign(V, 0.f);
  if (p.greedy()) {
    int best = 0;
    for (int i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;
    (*probs)[best] = 1.f;
    return;
  }
  // Candidates sorted by logit, descending; filters keep a prefix.
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  int keep = V;
  if (p.top_k > 0 && p.top_k < V) {
    keep = p.top_k;
    std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
  } else {
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  }
  const double inv_t = 1.0 / p.temperature;
  const double mx = logits[idx[0]];
  std::vector<double> e(keep);
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += e[i] = std::exp((logits[idx[i]] - mx) * inv_t);
  if (p.top_p < 1.f) {
    double acc = 0;
    for (int i = 0; i < keep; ++i) {
      acc += e[i] / sum;
      if (acc >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.f) {
    double floor = p.min_p * e[0];
    int k = 1;
    while (k < keep && e[k] >= floor) ++k;
    keep = k;
  }
  double kept = 0;
  for (int i = 0; i < keep; ++i) kept += e[i];
  for (int i = 0; i < keep; ++i) (*probs)[idx[i]] = static_cast<float>(e[i] / kept);
}

int32_t GreedyToken(const float* logits, int V) {
  return static_cast<int32_t>(kernels::Argmax(logits, V));
}

int32_t Sampler::SampleFrom(const std::vector<float>& probs) {
  double u = Uniform();
  double total = 0;
  for (float x : probs) total += x;
  double acc = 0;
  int32_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.f) continue;
    acc += probs[i] / total;
    last = static_cast<int32_t>(i);
    if (u < acc) return last;
  }
  return last;
}

int32_t Sampler::Sample(const float* logits, int V, const SamplingParams& p) {
  if (p.greedy()) return GreedyToken(logits, V);
  Probs(logits, V, p, &scratch_);
  return SampleFrom(scratch_);
}

}  // namespace specd
