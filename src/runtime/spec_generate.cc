#include "runtime/spec_generate.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "spec/verify.h"

namespace specd {

StatusOr<SpecAlgorithm> ParseSpecAlgorithm(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), ::toupper);
  if (u == "NONE" || u.empty()) return SpecAlgorithm::kNone;
  if (u == "EAGLE3" || u == "EAGLE") return SpecAlgorithm::kEagle3;
  if (u == "NGRAM") return SpecAlgorithm::kNgram;
  return InvalidArgumentError("--speculative-algorithm: expected NONE, EAGLE3 or NGRAM, got '" +
                              s + "'");
}

namespace {

// Runs the draft head over committed rows: row k at position pos0 + k holds
// (aux[k], next_tokens[k]). Leaves the last row's outputs in the state.
Status DraftExtend(Eagle3Head* head, Eagle3Head::State* st, const float* aux, int aux_stride,
                   const std::vector<int>& aux_rows, const std::vector<int32_t>& next_tokens,
                   int pos0) {
  const int m = static_cast<int>(next_tokens.size());
  std::vector<float> rows(static_cast<size_t>(m) * aux_stride);
  for (int k = 0; k < m; ++k)
    std::copy(aux + static_cast<size_t>(aux_rows[k]) * aux_stride,
              aux + static_cast<size_t>(aux_rows[k] + 1) * aux_stride,
              rows.begin() + static_cast<size_t>(k) * aux_stride);
  std::vector<int32_t> pos(m);
  for (int k = 0; k < m; ++k) pos[k] = pos0 + k;
  std::vector<float> hid, logits;
  RETURN_IF_ERROR(head->Forward(st, next_tokens, rows.data(), /*from_aux=*/true, pos, st->length,
                                {}, &hid, &logits));
  const int H = head->hidden_dim(), V = head->draft_vocab();
  st->last_hidden.assign(hid.end() - H, hid.end());
  st->last_logits.assign(logits.end() - V, logits.end());
  return Status::Ok();
}

}  // namespace

Status GenerateSpeculative(Engine& engine, Eagle3Head* head, const SpecOptions& opt,
                           const GenerateRequest& req, const TokenCallback& on_token,
                           GenerateResult* result) {
  if (opt.algorithm == SpecAlgorithm::kNone) return GeneratePlain(engine, req, on_token, result);
  const ModelConfig& c = engine.config();
  RETURN_IF_ERROR(ValidateRequest(c, req));
  RETURN_IF_ERROR(opt.tree.Validate());
  const bool eagle = opt.algorithm == SpecAlgorithm::kEagle3;
  if (eagle && head == nullptr) return InvalidArgumentError("EAGLE3 needs --draft-model");
  *result = GenerateResult();
  GenerateStats& st = result->stats;
  st.n_prompt = static_cast<int>(req.prompt.size());
  st.weight_bytes = engine.runner().model().weight_bytes();
  const int max_new = std::min<int64_t>(req.max_tokens, c.max_seq_len - req.prompt.size() + 1);
  const int V = c.vocab_size;
  const int aux_stride = 3 * c.hidden_dim;

  Sampler sampler(req.sampling.seed);
  const int seq = engine.NewSequence();
  struct Cleanup {
    Engine& e;
    int seq;
    ~Cleanup() { e.FreeSequence(seq); }
  } cleanup{engine, seq};

  ForwardOutput out;
  Stopwatch sw;
  SeqInput in;
  in.seq = seq;
  in.tokens = req.prompt;
  RETURN_IF_ERROR(engine.Forward({in}, eagle, &out));
  std::vector<int32_t> history = req.prompt;
  int32_t tok = sampler.Sample(out.logits.data(), V, req.sampling);
  Eagle3Head::State dstate;
  if (eagle) {
    std::vector<int> rows(req.prompt.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
    std::vector<int32_t> next(req.prompt.begin() + 1, req.prompt.end());
    next.push_back(tok);
    RETURN_IF_ERROR(DraftExtend(head, &dstate, out.aux_hidden.data(), aux_stride, rows, next, 0));
  }
  st.prefill_s = sw.Seconds();
  sw.Reset();
  double comm0 = engine.runner().comm()->comm_seconds();
  result->finish_reason = "length";

  // Emits one token; returns false when generation must end.
  auto emit = [&](int32_t t) {
    result->tokens.push_back(t);
    history.push_back(t);
    if (!on_token(t)) {
      result->finish_reason = "cancelled";
      return false;
    }
    if (std::find(req.stop_ids.begin(), req.stop_ids.end(), t) != req.stop_ids.end()) {
      result->finish_reason = "stop";
      return false;
    }
    return static_cast<int>(result->tokens.size()) < max_new;
  };
  if (!emit(tok)) {
    st.n_generated = static_cast<int>(result->tokens.size());
    return Status::Ok();
  }
  Status s;
  while (true) {
    const int L = engine.kv().Length(seq);
    const int32_t root = history.back();
    Stopwatch phase;
    DraftTree tree;
    const bool room = L + opt.tree.num_draft_tokens <= c.max_seq_len;
    if (!room) {
      tree.Add(root, -1, 0.f);
    } else if (eagle) {
      auto t = DraftEagleTree(*head, &dstate, root, L, opt.tree);
      if (!t.ok()) return std::move(t).TakeStatus().WithStage("draft");
      tree = std::move(t).value();
    } else {
      tree = NgramDraft(history, opt.tree.num_draft_tokens - 1, opt.ngram);
    }
    st.draft_s += phase.Seconds();
    phase.Reset();
    in.tokens = tree.tokens;
    in.pos.resize(tree.size());
    for (int i = 0; i < tree.size(); ++i) in.pos[i] = L + tree.depth[i];
    in.tree_mask = tree.size() > 1 ? tree.AncestorMask() : std::vector<uint8_t>{};
    in.all_logits = true;
    s = engine.Forward({in}, eagle, &out);
    if (!s.ok()) break;
    st.target_forwards++;
    VerifyResult vr = VerifyTree(tree, out.logits.data(), V, req.sampling, &sampler);
    // Commit the accepted path: node path[k] moves from slot L + path[k] to L + k.
    const int a = static_cast<int>(vr.path.size()) - 1;
    for (int k = 1; k <= a; ++k) engine.MoveSlot(seq, L + vr.path[k], L + k);
    engine.Truncate(seq, L + a + 1);
    st.verify_s += phase.Seconds();
    if (st.accept_hist.size() < vr.emitted.size()) st.accept_hist.resize(vr.emitted.size(), 0);
    st.accept_hist[vr.emitted.size() - 1]++;
    bool go = true;
    for (int32_t t : vr.emitted) {
      if (!(go = emit(t))) break;
    }
    if (!go) break;
    if (eagle) {
      phase.Reset();
      std::vector<int32_t> next;
      for (int k = 1; k <= a; ++k) next.push_back(tree.tokens[vr.path[k]]);
      next.push_back(vr.bonus_token);
      s = DraftExtend(head, &dstate, out.aux_hidden.data(), aux_stride, vr.path, next, L);
      if (!s.ok()) break;
      st.draft_s += phase.Seconds();
    }
  }
  st.decode_s = sw.Seconds();
  st.comm_s = engine.runner().comm()->comm_seconds() - comm0;
  st.n_generated = static_cast<int>(result->tokens.size());
  return s;
}

}  // namespace specd
