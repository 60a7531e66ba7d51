// The speculative-decoding state of one sequence, steppable inside a batch.
// A step is: Draft (a tree rooted at the last verified token, as the
// sequence's SeqInput: tokens, positions base + depth, ancestor mask, logits
// for every node) → one target forward over every sequence of the batch →
// Verify (against this sequence's logits rows; returns the emitted tokens and
// the accepted-path KV edit, which the caller applies on every rank) →
// ExtendAccepted (EAGLE-3: feed the accepted rows to the draft head).
// Nothing here touches the target's KV cache or the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/kv_edit.h"
#include "model/model.h"
#include "spec/draft_cost.h"
#include "spec/eagle3_head.h"
#include "spec/spec_options.h"
#include "spec/verify.h"

namespace specd {

// Checks the options once, before any sequence uses them: the tree flags'
// ranges, and that EAGLE-3 has a head.
Status ValidateSpecOptions(const SpecOptions& options, const Eagle3Head* head);

struct SpecStep {
  VerifyResult verify;
  KvEdit kv;  // kKeepPath: the accepted path's slots, the rest dropped
  int drafted = 0, accepted = 0;  // tree depth and accepted draft tokens
};

class Speculator {
 public:
  // REQUIRES: ValidateSpecOptions(options, head).ok() and algorithm != kNone;
  // head outlives this object.
  // `acceptance`: the starting estimate (e.g. pooled over earlier sequences).
  Speculator(const SpecOptions& options, Eagle3Head* head, const ModelConfig& config,
             const AcceptanceModel* acceptance = nullptr);

  bool eagle() const { return eagle_; }
  // Most tokens Draft puts into one verify step at KV length L.
  int MaxTreeSize(int L) const;
  // Deepest chain an auto-shaped Draft may take at KV length L.
  int MaxAutoDepth(int L) const { return MaxTreeSize(L) - 1; }
  // Deepest chain Draft can fill now, at most MaxAutoDepth(L): what the
  // choice of depth should weigh. N-gram (and oracle) drafts cost nothing to
  // make, so this is the draft the history actually offers (0 when nothing
  // matches: the step is plain whatever depth is asked for); an EAGLE-3 head
  // always fills MaxAutoDepth(L).
  int DraftableDepth(const std::vector<int32_t>& history, int L) const;

  // EAGLE-3 prefill bookkeeping (a no-op for n-gram drafting): target rows at
  // positions [pos0, pos0 + m) just ran; aux points at the first of them in
  // ForwardOutput::aux_hidden and next_tokens[k] is the token at pos0 + k + 1.
  // Fixed shapes run the head over them at once; auto shapes queue the newest
  // kMaxPendingRows as ExtendAccepted does.
  Status ExtendPrefill(const float* aux, const std::vector<int32_t>& next_tokens, int pos0);
  // Forgets the draft state (the sequence's KV was dropped and is re-prefilled).
  void Reset();

  // Drafts the tree rooted at history.back(), to be verified at KV length L
  // (the root is not yet in the KV cache), and fills `in` for sequence `seq`.
  // depth < 0: the configured tree; depth >= 0: a chain of at most `depth`
  // tokens (0: the root alone, a plain step).
  Status Draft(const std::vector<int32_t>& history, int L, int seq, SeqInput* in,
               int depth = -1);
  // Verifies the drafted tree against its logits rows (tree size, vocab).
  // The returned edit moves KV slot L + path[k] to L + k and cuts the
  // sequence to L + accepted + 1 slots.
  // When the tree had draft tokens, step.drafted / step.accepted say how deep
  // it was and how many were accepted (what acceptance() observed).
  // A row that cannot be sampled: VerifyTree's error (step->verify.path ends
  // at its node), nothing observed and no edit.
  Status Verify(int seq, int L, const float* logits, const SamplingParams& sampling,
                Sampler* sampler, SpecStep* step);
  // EAGLE-3 only: queues the accepted rows for the draft head. aux is this
  // sequence's first row in ForwardOutput::aux_hidden of the verify step.
  // Fixed shapes run the head over them at once; auto shapes when the next
  // draft needs them, over the newest kMaxPendingRows only, so plain steps
  // cost no draft-head forward.
  Status ExtendAccepted(const VerifyResult& vr, const float* aux, int L);
  // Auto shapes, a plain step (depth 0) that ran as plain decoding, without
  // Draft and Verify: token was sampled from the row of position L, whose
  // aux row (EAGLE-3) is queued for the head as ExtendAccepted would; the
  // acceptance estimate ages (AcceptanceModel::Age).
  void AcceptPlain(const float* aux, int32_t token, int L);

  const DraftTree& tree() const { return tree_; }
  // Whether the last Draft fed the head rows of plain steps or of the prompt
  // (a catch-up), not only the rows accepted by the step before: its cost is
  // not what a draft between two drafts costs.
  bool last_draft_caught_up() const { return last_draft_caught_up_; }
  // Acceptance of this sequence's drafts by depth (what Verify observed).
  const AcceptanceModel& acceptance() const { return acceptance_; }

  static constexpr int kMaxPendingRows = 16;

 private:
  // The head over m consecutive committed rows: aux (m, 3 H_target), the
  // token after each, the first one's position.
  Status Extend(const float* aux, const std::vector<int32_t>& next_tokens, int pos0);
  // Appends one aux row (aux_stride_ floats; next_token at pos + 1, pos
  // consecutive with what is queued) to the rows the head was not fed yet.
  void Queue(const float* row, int32_t next_token, int pos);
  // Keeps the newest kMaxPendingRows of the queue once it holds twice that.
  void TrimPending();
  Status FlushPending();
  // kOracle: a chain of up to n tokens of options_.oracle_sequence after
  // history (a prefix of it), each kept with probability oracle_accept.
  DraftTree OracleDraft(const std::vector<int32_t>& history, int n) const;

  SpecOptions options_;
  Eagle3Head* head_;
  bool eagle_;
  int vocab_, max_seq_len_, aux_stride_;
  DraftTree tree_;
  Eagle3Head::State dstate_;
  AcceptanceModel acceptance_;
  // Accepted rows not yet run through the draft head: aux rows (m, aux_stride),
  // the token after each, and the first one's position (they are consecutive).
  std::vector<float> pending_aux_;
  std::vector<int32_t> pending_next_;
  int pending_pos0_ = 0;
  bool pending_unverified_ = false;  // the queue holds plain-step or prompt rows
  bool last_draft_caught_up_ = false;
};

}  // namespace specd
