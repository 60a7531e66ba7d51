// The speculative-decoding state of one sequence, steppable inside a batch.
// A step is: Draft (a tree rooted at the last verified token) → one
// Engine::Forward over every sequence's tree (each SeqInput with its own tree
// mask and positions, all_logits) → Commit (verify against this sequence's
// logits rows, move the accepted path's KV slots into place, drop the rest)
// → ExtendAccepted (EAGLE-3: feed the accepted rows to the draft head).
// GenerateSpeculative is this loop for a batch of one.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/engine.h"
#include "runtime/spec_generate.h"
#include "spec/verify.h"

namespace specd {

class SpecSequence {
 public:
  // REQUIRES: options.algorithm != kNone; head != nullptr for kEagle3 (and
  // outlives this object).
  SpecSequence(const SpecOptions& options, Eagle3Head* head, const ModelConfig& config);

  bool eagle() const { return eagle_; }
  // Most tokens Draft puts into one verify step at KV length L.
  int MaxTreeSize(int L) const;

  // EAGLE-3 prefill bookkeeping (a no-op for n-gram drafting): target rows at
  // positions [pos0, pos0 + m) just ran; aux points at the first of them in
  // ForwardOutput::aux_hidden and next_tokens[k] is the token at pos0 + k + 1.
  Status ExtendPrefill(const float* aux, const std::vector<int32_t>& next_tokens, int pos0);
  // Forgets the draft state (the sequence's KV was dropped and is re-prefilled).
  void Reset();

  // Drafts the tree rooted at history.back(), to be verified at KV length L
  // (the root is not yet in the KV cache), and fills `in` for sequence `seq`.
  Status Draft(const std::vector<int32_t>& history, int L, int seq, SeqInput* in);
  // Verifies the drafted tree against its logits rows (tree size, vocab) and
  // commits the accepted path: KV slot L + path[k] moves to L + k, length
  // becomes L + accepted + 1.
  VerifyResult Commit(Engine& engine, int seq, int L, const float* logits,
                      const SamplingParams& sampling, Sampler* sampler);
  // EAGLE-3 only: extends the draft state with the accepted rows. aux is this
  // sequence's first row in ForwardOutput::aux_hidden of the verify step.
  Status ExtendAccepted(const VerifyResult& vr, const float* aux, int L);

  const DraftTree& tree() const { return tree_; }

 private:
  Status Extend(const float* aux, const std::vector<int>& rows,
                const std::vector<int32_t>& next_tokens, int pos0);

  SpecOptions options_;
  Eagle3Head* head_;
  bool eagle_;
  int vocab_, max_seq_len_, aux_stride_;
  DraftTree tree_;
  Eagle3Head::State dstate_;
};

}  // namespace specd
