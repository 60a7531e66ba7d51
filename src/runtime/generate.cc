#include "runtime/generate.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"

namespace specd {

double GenerateStats::accept_length_mean() const {
  double steps = 0, tokens = 0;
  for (size_t i = 0; i < accept_hist.size(); ++i) {
    steps += accept_hist[i];
    tokens += static_cast<double>(accept_hist[i]) * (i + 1);
  }
  return steps > 0 ? tokens / steps : 0;
}

Status ValidateRequest(const ModelConfig& c, const GenerateRequest& req) {
  if (req.prompt.empty()) return InvalidArgumentError("prompt: empty (expected at least one token)");
  for (int32_t t : req.prompt) {
    if (t < 0 || t >= c.vocab_size)
      return InvalidArgumentError(
          fmt::format("prompt: token id {} out of range [0, {})", t, c.vocab_size));
  }
  if (req.max_tokens <= 0)
    return InvalidArgumentError(fmt::format("max_tokens: must be > 0, got {}", req.max_tokens));
  if (static_cast<int64_t>(req.prompt.size()) >= c.max_seq_len)
    return OutOfRangeError(fmt::format("prompt: {} tokens do not fit the context length {}",
                                       req.prompt.size(), c.max_seq_len));
  return req.sampling.Validate();
}

Status GeneratePlain(Engine& engine, const GenerateRequest& req, const TokenCallback& on_token,
                     GenerateResult* result) {
  const ModelConfig& c = engine.config();
  RETURN_IF_ERROR(ValidateRequest(c, req));
  *result = GenerateResult();
  GenerateStats& st = result->stats;
  st.n_prompt = static_cast<int>(req.prompt.size());
  st.weight_bytes = engine.runner().model().weight_bytes();
  // Context length caps the output: the last token never needs a KV slot.
  const int max_new = std::min<int64_t>(req.max_tokens, c.max_seq_len - req.prompt.size() + 1);

  Sampler sampler(req.sampling.seed);
  // --profile: a step is a forward pass plus the sampling of its logits; the
  // prefill step is the prompt's forward plus the first token's sampling.
  OpProfile& prof = engine.runner().profile();
  prof.set_phase(ProfPhase::kPrefill);
  int64_t step_start = prof.enabled() ? NowNanos() : 0;
  const ScopedSequence sequence(engine);
  const int seq = sequence.id();
  ForwardOutput out;
  Stopwatch sw;
  SeqInput in;
  in.seq = seq;
  in.tokens = req.prompt;
  Status s = engine.Forward({in}, false, &out);
  if (!s.ok()) return s;
  st.prefill_s = sw.Seconds();
  sw.Reset();
  double comm0 = engine.runner().comm()->comm_seconds();
  result->finish_reason = "length";
  while (true) {
    int32_t tok;
    {
      OpTimer timer(&prof, ProfOp::kSampling);
      tok = sampler.Sample(out.logits.data(), c.vocab_size, req.sampling);
    }
    if (prof.enabled()) {
      const int64_t now = NowNanos();
      prof.AddStep(now - step_start);
      prof.set_phase(ProfPhase::kDecode);
      step_start = now;
    }
    result->tokens.push_back(tok);
    bool stop = std::find(req.stop_ids.begin(), req.stop_ids.end(), tok) != req.stop_ids.end();
    if (!on_token(tok)) {
      result->finish_reason = "cancelled";
      break;
    }
    if (stop) {
      result->finish_reason = "stop";
      break;
    }
    if (static_cast<int>(result->tokens.size()) >= max_new) break;
    in.tokens = {tok};
    s = engine.Forward({in}, false, &out);
    if (!s.ok()) break;
    st.target_forwards++;
  }
  st.decode_s = sw.Seconds();
  st.comm_s = engine.runner().comm()->comm_seconds() - comm0;
  st.n_generated = static_cast<int>(result->tokens.size());
  return s;
}

}  // namespace specd
