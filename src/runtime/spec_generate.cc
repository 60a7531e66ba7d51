#include "runtime/spec_generate.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "runtime/spec_batch.h"
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

  Sampler sampler(req.sampling.seed);
  const ScopedSequence sequence(engine);
  const int seq = sequence.id();

  // --profile: the prefill step is the prompt's forward, the first sample and
  // the draft head's prefill; a decode step is one draft-verify-commit round.
  OpProfile& prof = engine.runner().profile();
  prof.set_phase(ProfPhase::kPrefill);
  int64_t step_start = prof.enabled() ? NowNanos() : 0;
  auto end_step = [&] {
    if (!prof.enabled()) return;
    const int64_t now = NowNanos();
    prof.AddStep(now - step_start);
    prof.set_phase(ProfPhase::kDecode);
    step_start = now;
  };
  ForwardOutput out;
  Stopwatch sw;
  SeqInput in;
  in.seq = seq;
  in.tokens = req.prompt;
  RETURN_IF_ERROR(engine.Forward({in}, eagle, &out));
  std::vector<int32_t> history = req.prompt;
  int32_t tok;
  {
    OpTimer timer(&prof, ProfOp::kSampling);
    tok = sampler.Sample(out.logits.data(), V, req.sampling);
  }
  SpecSequence spec(opt, head, c);
  if (eagle) {
    OpTimer timer(&prof, ProfOp::kDraft);
    std::vector<int32_t> next(req.prompt.begin() + 1, req.prompt.end());
    next.push_back(tok);
    RETURN_IF_ERROR(spec.ExtendPrefill(out.aux_hidden.data(), next, 0));
  }
  end_step();
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
    Stopwatch phase;
    {
      OpTimer timer(&prof, ProfOp::kDraft);
      s = spec.Draft(history, L, seq, &in);
    }
    if (!s.ok()) return s;
    st.draft_s += phase.Seconds();
    phase.Reset();
    s = engine.Forward({in}, eagle, &out);
    if (!s.ok()) break;
    st.target_forwards++;
    VerifyResult vr;
    {
      OpTimer timer(&prof, ProfOp::kVerify);
      vr = spec.Commit(engine, seq, L, out.logits.data(), req.sampling, &sampler);
    }
    st.verify_s += phase.Seconds();
    if (st.accept_hist.size() < vr.emitted.size()) st.accept_hist.resize(vr.emitted.size(), 0);
    st.accept_hist[vr.emitted.size() - 1]++;
    bool go = true;
    for (int32_t t : vr.emitted) {
      if (!(go = emit(t))) break;
    }
    if (!go) {
      end_step();
      break;
    }
    if (eagle) {
      OpTimer timer(&prof, ProfOp::kDraft);
      phase.Reset();
      s = spec.ExtendAccepted(vr, out.aux_hidden.data(), L);
      if (!s.ok()) break;
      st.draft_s += phase.Seconds();
    }
    end_step();
  }
  st.decode_s = sw.Seconds();
  st.comm_s = engine.runner().comm()->comm_seconds() - comm0;
  st.n_generated = static_cast<int>(result->tokens.size());
  return s;
}

}  // namespace specd
