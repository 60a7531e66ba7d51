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

namespace {

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

double Sampler::Uniform(int64_t position) const {
  // Two rounds, so that neighbouring seeds and neighbouring positions give
  // unrelated streams.
  const uint64_t z = Mix(Mix(seed_ ^ 0x9E3779B97F4A7C15ull) +
                         static_cast<uint64_t>(position) * 0xD1B54A32D192ED03ull);
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

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
  // Candidates: every token, or the top_k largest logits (ties to the lower
  // id). Only top-p needs them sorted.
  auto before = [logits](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int> idx(V);
  std::iota(idx.begin(), idx.end(), 0);
  if (p.top_k > 0 && p.top_k < V) {
    std::nth_element(idx.begin(), idx.begin() + (p.top_k - 1), idx.end(), before);
    idx.resize(p.top_k);
  }
  if (p.top_p < 1.f) std::sort(idx.begin(), idx.end(), before);
  const int n = static_cast<int>(idx.size());
  const double inv_t = 1.0 / p.temperature;
  float mx = logits[idx[0]];
  for (int i : idx) mx = std::max(mx, logits[i]);
  std::vector<double> e(n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += e[i] = std::exp((logits[idx[i]] - mx) * inv_t);
  int keep = n;
  if (p.top_p < 1.f) {
    // The smallest prefix of the sorted candidates whose mass reaches top_p.
    double acc = 0;
    for (int i = 0; i < n; ++i) {
      acc += e[i] / sum;
      if (acc >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  // min-p: drop tokens below min_p times the largest probability (e = 1).
  const double floor = p.min_p;
  double kept = 0;
  for (int i = 0; i < keep; ++i)
    if (e[i] >= floor) kept += e[i];
  for (int i = 0; i < keep; ++i)
    if (e[i] >= floor) (*probs)[idx[i]] = static_cast<float>(e[i] / kept);
}

int32_t GreedyToken(const float* logits, int V) {
  return static_cast<int32_t>(kernels::Argmax(logits, V));
}

int32_t Sampler::SampleFrom(const std::vector<float>& probs, int64_t position) const {
  const double u = Uniform(position);
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

int32_t Sampler::Sample(const float* logits, int V, const SamplingParams& p, int64_t position) {
  if (p.greedy()) return GreedyToken(logits, V);
  Probs(logits, V, p, &scratch_);
  return SampleFrom(scratch_, position);
}

}  // namespace specd
