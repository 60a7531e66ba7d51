// A test reference: plain decoding written as the simplest loop over
// Engine::Forward (whole prompt in one pass, then one token per pass), with
// none of the scheduler's batching, chunking, paging budget or speculation.
// Tests compare what the scheduler produces against it.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "sampling/sampler.h"

namespace specd {

// The first `max_tokens` tokens after `prompt`, sampled with `sampling` and a
// Sampler seeded with sampling.seed (greedy at temperature 0). Empty on error.
inline std::vector<int32_t> ReferenceDecode(Engine& engine, const std::vector<int32_t>& prompt,
                                            int max_tokens, const SamplingParams& sampling = {}) {
  const int V = engine.config().vocab_size;
  const ScopedSequence sequence(engine);
  Sampler sampler(sampling.seed);
  SeqInput in;
  in.seq = sequence.id();
  in.tokens = prompt;
  ForwardOutput out;
  std::vector<int32_t> tokens;
  while (static_cast<int>(tokens.size()) < max_tokens) {
    if (!engine.Forward({in}, false, &out).ok()) return {};
    const int64_t position = static_cast<int64_t>(prompt.size() + tokens.size());
    tokens.push_back(sampler.Sample(out.logits.data(), V, sampling, position));
    in.tokens = {tokens.back()};
  }
  return tokens;
}

}  // namespace specd
