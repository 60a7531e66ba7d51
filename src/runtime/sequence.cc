#include "runtime/sequence.h"

#include <algorithm>
#include <cmath>

namespace specd {
namespace {

// log_softmax(logits)[id] and the top `k` entries, under the raw distribution.
TokenLogprob ComputeLogprob(const float* logits, int V, int32_t id, int k) {
  float mx = logits[0];
  for (int i = 1; i < V; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < V; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float log_z = mx + static_cast<float>(std::log(sum));
  TokenLogprob lp;
  lp.id = id;
  lp.logprob = logits[id] - log_z;
  if (k > 0) {
    std::vector<int32_t> idx(V);
    for (int i = 0; i < V; ++i) idx[i] = i;
    const int kk = std::min(k, V);
    std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int i = 0; i < kk; ++i) lp.top.push_back({idx[i], logits[idx[i]] - log_z});
  }
  return lp;
}

}  // namespace

Sequence::Sequence(ServeRequest r, std::shared_ptr<RequestStream> s, double submitted,
                   int max_seq_len, const Tokenizer* tokenizer, std::unique_ptr<Speculator> sp)
    : req(std::move(r)),
      stream(std::move(s)),
      history(req.prompt),
      sampler(req.sampling.seed),
      spec(std::move(sp)),
      submitted_s(submitted),
      stops_(req.stop_strings) {
  stats.n_prompt = static_cast<int>(history.size());
  const int64_t room = int64_t{max_seq_len} - stats.n_prompt + 1;
  max_new_ = static_cast<int>(std::min<int64_t>(req.max_tokens, room));
  if (tokenizer) decoder_ = std::make_unique<StreamDecoder>(tokenizer);
}

void Sequence::Start(int seq) {
  kv_seq = seq;
  n_kv = 0;
  if (stats.n_generated == 0) {
    prefill_end = static_cast<int>(history.size());
    sample_after_prefill = true;
  } else {
    prefill_end = static_cast<int>(history.size()) - 1;
    sample_after_prefill = false;
  }
  if (spec) spec->Reset();
}

std::string Sequence::Emit(const std::vector<int32_t>& tokens, const float* logits,
                           const std::vector<int>& logit_rows, int vocab, double now) {
  OutputDelta d;
  std::string finish;
  for (size_t i = 0; i < tokens.size() && finish.empty(); ++i) {
    const int32_t t = tokens[i];
    stats.n_generated++;
    history.push_back(t);
    d.token_ids.push_back(t);
    if (req.logprobs >= 0)
      d.logprobs.push_back(ComputeLogprob(logits + static_cast<size_t>(logit_rows[i]) * vocab,
                                          vocab, t, req.logprobs));
    if (decoder_) d.text += stops_.Push(decoder_->Push(t));
    if (stops_.stopped()) finish = "stop";
    else if (std::find(req.stop_ids.begin(), req.stop_ids.end(), t) != req.stop_ids.end())
      finish = "stop";
    else if (stats.n_generated >= max_new_) finish = "length";
  }
  if (last_token_s == 0) stats.prefill_s = now - started_s;
  last_token_s = now;
  d.prompt_tokens = stats.n_prompt;
  d.completion_tokens = stats.n_generated;
  stream->Push(d);
  return finish;
}

void Sequence::Finish(const std::string& reason, const Status& error, double now) {
  if (done_) return;
  done_ = true;
  OutputDelta d;
  if (reason == "stop" || reason == "length") {
    std::string rest = decoder_ ? decoder_->Flush() : "";
    d.text = stops_.Push(rest);
    d.text += stops_.Flush();
  }
  if (last_token_s > 0) stats.decode_s = now - (started_s + stats.prefill_s);
  d.finished = true;
  d.finish_reason = reason;
  d.error = error;
  d.prompt_tokens = stats.n_prompt;
  d.completion_tokens = stats.n_generated;
  d.stats = stats;
  stream->Push(d);
}

}  // namespace specd
