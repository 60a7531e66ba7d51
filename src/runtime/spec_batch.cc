#include "runtime/spec_batch.h"

#include <algorithm>

namespace specd {

SpecSequence::SpecSequence(const SpecOptions& options, Eagle3Head* head,
                           const ModelConfig& config)
    : options_(options),
      head_(head),
      eagle_(options.algorithm == SpecAlgorithm::kEagle3),
      vocab_(config.vocab_size),
      max_seq_len_(config.max_seq_len),
      aux_stride_(3 * config.hidden_dim) {}

int SpecSequence::MaxTreeSize(int L) const {
  return L + options_.tree.num_draft_tokens <= max_seq_len_ ? options_.tree.num_draft_tokens : 1;
}

void SpecSequence::Reset() {
  dstate_ = Eagle3Head::State();
  tree_ = DraftTree();
}

// Runs the draft head over committed rows: row k at position pos0 + k holds
// (aux[rows[k]], next_tokens[k]). Leaves the last row's outputs in the state.
Status SpecSequence::Extend(const float* aux, const std::vector<int>& aux_rows,
                            const std::vector<int32_t>& next_tokens, int pos0) {
  const int m = static_cast<int>(next_tokens.size());
  if (m == 0) return Status::Ok();
  std::vector<float> rows(static_cast<size_t>(m) * aux_stride_);
  for (int k = 0; k < m; ++k)
    std::copy(aux + static_cast<size_t>(aux_rows[k]) * aux_stride_,
              aux + static_cast<size_t>(aux_rows[k] + 1) * aux_stride_,
              rows.begin() + static_cast<size_t>(k) * aux_stride_);
  std::vector<int32_t> pos(m);
  for (int k = 0; k < m; ++k) pos[k] = pos0 + k;
  std::vector<float> hid, logits;
  RETURN_IF_ERROR(head_->Forward(&dstate_, next_tokens, rows.data(), /*from_aux=*/true, pos,
                                 dstate_.length, {}, &hid, &logits));
  const int H = head_->hidden_dim(), V = head_->draft_vocab();
  dstate_.last_hidden.assign(hid.end() - H, hid.end());
  dstate_.last_logits.assign(logits.end() - V, logits.end());
  return Status::Ok();
}

Status SpecSequence::ExtendPrefill(const float* aux, const std::vector<int32_t>& next_tokens,
                                   int pos0) {
  if (!eagle_) return Status::Ok();
  std::vector<int> rows(next_tokens.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
  return Extend(aux, rows, next_tokens, pos0).WithStage("draft");
}

Status SpecSequence::Draft(const std::vector<int32_t>& history, int L, int seq, SeqInput* in) {
  const int32_t root = history.back();
  tree_ = DraftTree();
  if (MaxTreeSize(L) == 1) {
    tree_.Add(root, -1, 0.f);
  } else if (eagle_) {
    auto t = DraftEagleTree(*head_, &dstate_, root, L, options_.tree);
    if (!t.ok()) return std::move(t).TakeStatus().WithStage("draft");
    tree_ = std::move(t).value();
  } else {
    tree_ = NgramDraft(history, options_.tree.num_draft_tokens - 1, options_.ngram);
  }
  in->seq = seq;
  in->tokens = tree_.tokens;
  in->pos.resize(tree_.size());
  for (int i = 0; i < tree_.size(); ++i) in->pos[i] = L + tree_.depth[i];
  in->tree_mask = tree_.size() > 1 ? tree_.AncestorMask() : std::vector<uint8_t>{};
  in->all_logits = true;
  return Status::Ok();
}

VerifyResult SpecSequence::Commit(Engine& engine, int seq, int L, const float* logits,
                                  const SamplingParams& sampling, Sampler* sampler) {
  VerifyResult vr = VerifyTree(tree_, logits, vocab_, sampling, sampler);
  const int a = static_cast<int>(vr.path.size()) - 1;
  for (int k = 1; k <= a; ++k) engine.MoveSlot(seq, L + vr.path[k], L + k);
  engine.Truncate(seq, L + a + 1);
  return vr;
}

Status SpecSequence::ExtendAccepted(const VerifyResult& vr, const float* aux, int L) {
  if (!eagle_) return Status::Ok();
  const int a = static_cast<int>(vr.path.size()) - 1;
  std::vector<int32_t> next;
  for (int k = 1; k <= a; ++k) next.push_back(tree_.tokens[vr.path[k]]);
  next.push_back(vr.bonus_token);
  return Extend(aux, vr.path, next, L).WithStage("draft");
}

}  // namespace specd
