#include "spec/speculator.h"

#include <algorithm>

namespace specd {

Status ValidateSpecOptions(const SpecOptions& options, const Eagle3Head* head) {
  if (options.algorithm == SpecAlgorithm::kNone) return Status::Ok();
  RETURN_IF_ERROR(options.tree.Validate());
  if (options.algorithm == SpecAlgorithm::kEagle3 && head == nullptr)
    return InvalidArgumentError("EAGLE3 needs --draft-model");
  if (options.algorithm == SpecAlgorithm::kOracle && options.oracle_sequence.empty())
    return InvalidArgumentError("ORACLE drafting needs the target's greedy continuation");
  return Status::Ok();
}

Speculator::Speculator(const SpecOptions& options, Eagle3Head* head, const ModelConfig& config,
                       const AcceptanceModel* acceptance)
    : options_(options),
      head_(head),
      eagle_(options.algorithm == SpecAlgorithm::kEagle3),
      vocab_(config.vocab_size),
      max_seq_len_(config.max_seq_len),
      aux_stride_(3 * config.hidden_dim),
      acceptance_(options.MaxDraftDepth()) {
  if (acceptance != nullptr && acceptance->max_depth() == acceptance_.max_depth())
    acceptance_ = *acceptance;
}

int Speculator::MaxTreeSize(int L) const {
  const int n = options_.auto_shape ? options_.max_auto_depth + 1 : options_.tree.num_draft_tokens;
  return L + n <= max_seq_len_ ? n : 1;
}

int Speculator::DraftableDepth(const std::vector<int32_t>& history, int L) const {
  const int deepest = MaxAutoDepth(L);
  if (eagle_ || deepest == 0) return deepest;
  const DraftTree t = options_.algorithm == SpecAlgorithm::kOracle
                          ? OracleDraft(history, deepest)
                          : NgramDraft(history, deepest, options_.ngram);
  return t.size() - 1;  // a chain: one node per depth under the root
}

void Speculator::Reset() {
  dstate_ = Eagle3Head::State();
  tree_ = DraftTree();
  pending_aux_.clear();
  pending_next_.clear();
  pending_unverified_ = false;
}

// Runs the draft head over committed rows: row k at position pos0 + k holds
// (aux row k, next_tokens[k]); aux: (m, aux_stride_). Leaves the last row's
// outputs in the state.
Status Speculator::Extend(const float* aux, const std::vector<int32_t>& next_tokens, int pos0) {
  const int m = static_cast<int>(next_tokens.size());
  if (m == 0) return Status::Ok();
  std::vector<int32_t> pos(m);
  for (int k = 0; k < m; ++k) pos[k] = pos0 + k;
  std::vector<float> hid, logits;
  RETURN_IF_ERROR(head_->Forward(&dstate_, next_tokens, aux, /*from_aux=*/true, pos,
                                 dstate_.length, {}, &hid, &logits, /*last_logits_only=*/true));
  const int H = head_->hidden_dim(), V = head_->draft_vocab();
  dstate_.last_hidden.assign(hid.end() - H, hid.end());
  dstate_.last_logits.assign(logits.end() - V, logits.end());
  return Status::Ok();
}

Status Speculator::ExtendPrefill(const float* aux, const std::vector<int32_t>& next_tokens,
                                   int pos0) {
  if (!eagle_) return Status::Ok();
  const int m = static_cast<int>(next_tokens.size());
  if (!options_.auto_shape) return Extend(aux, next_tokens, pos0).WithStage("draft");
  // Auto shapes queue the prompt like plain steps: a sequence that never
  // drafts never runs the head, and one that does runs it over the newest
  // kMaxPendingRows rows when its first draft needs them.
  const int first = std::max(0, m - kMaxPendingRows);
  if (first > 0) {  // the queue must stay consecutive: the older rows go
    pending_aux_.clear();
    pending_next_.clear();
  }
  for (int k = first; k < m; ++k)
    Queue(aux + static_cast<size_t>(k) * aux_stride_, next_tokens[k], pos0 + k);
  pending_unverified_ = true;
  TrimPending();
  return Status::Ok();
}

void Speculator::Queue(const float* row, int32_t next_token, int pos) {
  if (pending_next_.empty()) pending_pos0_ = pos;
  pending_aux_.insert(pending_aux_.end(), row, row + aux_stride_);
  pending_next_.push_back(next_token);
}

void Speculator::TrimPending() {
  // Keep only the newest kMaxPendingRows (dropping in chunks, so each row is
  // moved at most once).
  const int n = static_cast<int>(pending_next_.size());
  if (n >= 2 * kMaxPendingRows) {
    const int drop = n - kMaxPendingRows;
    pending_aux_.erase(pending_aux_.begin(), pending_aux_.begin() + size_t(drop) * aux_stride_);
    pending_next_.erase(pending_next_.begin(), pending_next_.begin() + drop);
    pending_pos0_ += drop;
  }
}

Status Speculator::Draft(const std::vector<int32_t>& history, int L, int seq, SeqInput* in,
                         int depth) {
  const int32_t root = history.back();
  tree_ = DraftTree();
  TreeParams shape = options_.tree;
  if (depth >= 0) {
    depth = std::min(depth, MaxTreeSize(L) - 1);
    shape.num_steps = std::max(1, depth);
    shape.topk = 1;
    shape.num_draft_tokens = depth + 1;
  }
  last_draft_caught_up_ = false;
  if (MaxTreeSize(L) == 1 || depth == 0) {
    tree_.Add(root, -1, 0.f);
  } else if (eagle_) {
    last_draft_caught_up_ = pending_unverified_;
    RETURN_IF_ERROR(FlushPending());
    auto t = DraftEagleTree(*head_, &dstate_, root, L, shape);
    if (!t.ok()) return std::move(t).TakeStatus().WithStage("draft");
    tree_ = std::move(t).value();
  } else if (options_.algorithm == SpecAlgorithm::kOracle) {
    tree_ = OracleDraft(history, shape.num_draft_tokens - 1);
  } else {
    tree_ = NgramDraft(history, shape.num_draft_tokens - 1, options_.ngram);
  }
  in->seq = seq;
  in->tokens = tree_.tokens;
  in->pos.resize(tree_.size());
  for (int i = 0; i < tree_.size(); ++i) in->pos[i] = L + tree_.depth[i];
  in->tree_mask = tree_.size() > 1 ? tree_.AncestorMask() : std::vector<uint8_t>{};
  in->all_logits = true;
  return Status::Ok();
}

DraftTree Speculator::OracleDraft(const std::vector<int32_t>& history, int n) const {
  DraftTree t;
  t.Add(history.back(), -1, 0.f);
  const std::vector<int32_t>& truth = options_.oracle_sequence;
  int parent = 0;
  for (int j = 0; j < n && history.size() + j < truth.size(); ++j) {
    const size_t pos = history.size() + j;
    // A hash of (seed, position, depth): the same draft for the same step.
    uint64_t h = options_.oracle_seed * 0x9E3779B97F4A7C15ull ^ (pos * 0xBF58476D1CE4E5B9ull) ^
                 (static_cast<uint64_t>(j) << 56);
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    const double u = static_cast<double>(h >> 11) / 9007199254740992.0;
    const int32_t tok = u < options_.oracle_accept ? truth[pos] : (truth[pos] + 1) % vocab_;
    parent = t.Add(tok, parent, 0.f);
  }
  return t;
}

Status Speculator::Verify(int seq, int L, const float* logits, const SamplingParams& sampling,
                          Sampler* sampler, SpecStep* out) {
  SpecStep& step = *out;
  step = SpecStep();
  RETURN_IF_ERROR(VerifyTree(tree_, logits, vocab_, sampling, sampler, L + 1, &step.verify));
  if (tree_.size() > 1) {
    for (int d : tree_.depth) step.drafted = std::max(step.drafted, d);
    step.accepted = static_cast<int>(step.verify.path.size()) - 1;
    acceptance_.Observe(step.drafted, step.accepted);
  }
  step.kv = KvEdit::KeepPath(seq, L, {step.verify.path.begin(), step.verify.path.end()});
  return Status::Ok();
}

Status Speculator::ExtendAccepted(const VerifyResult& vr, const float* aux, int L) {
  if (!eagle_) return Status::Ok();
  const size_t m = vr.path.size();
  for (size_t k = 0; k < m; ++k)
    Queue(aux + static_cast<size_t>(vr.path[k]) * aux_stride_,
          k + 1 < m ? tree_.tokens[vr.path[k + 1]] : vr.bonus_token, L + static_cast<int>(k));
  // Fixed shapes draft every step: run the head now, as the draft needs it.
  if (!options_.auto_shape) return FlushPending();
  TrimPending();
  return Status::Ok();
}

void Speculator::AcceptPlain(const float* aux, int32_t token, int L) {
  acceptance_.Age();
  if (!eagle_) return;
  Queue(aux, token, L);
  pending_unverified_ = true;
  TrimPending();
}

Status Speculator::FlushPending() {
  if (pending_next_.empty()) return Status::Ok();
  // At most the newest kMaxPendingRows: positions before them stay out of
  // the head's cache (its attention sees the slots it has; RoPE positions
  // stay exact), which costs some draft quality after a long plain stretch
  // and no head forward per plain step.
  const int n = static_cast<int>(pending_next_.size());
  const int skip = std::max(0, n - kMaxPendingRows);
  std::vector<int32_t> next(pending_next_.begin() + skip, pending_next_.end());
  Status s = Extend(pending_aux_.data() + static_cast<size_t>(skip) * aux_stride_, next,
                    pending_pos0_ + skip)
                 .WithStage("draft");
  pending_aux_.clear();
  pending_next_.clear();
  pending_unverified_ = false;
  return s;
}

}  // namespace specd
