// One request's life on rank 0, whichever front end submitted it (serve,
// generate, bench): its history, limits, stop ids and strings, sampler,
// optional speculator, output stream and statistics. The scheduler runs
// every Sequence; plain and speculative decoding differ only in `spec`.
//
// Invariants between steps:
//  - history = prompt + generated tokens; the KV cache holds history[0, n_kv).
//  - It is prefilling while n_kv < prefill_end; a step then feeds a chunk of
//    history[n_kv, ...) and samples once the chunk reaches the end (unless
//    resumed after preemption: it then knows history.back() already).
//  - Otherwise it decodes: history.back() is the last sampled token, not yet
//    in the KV cache (n_kv == history.size() - 1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/scheduler_request.h"
#include "runtime/scheduler_stop.h"
#include "sampling/sampler.h"
#include "spec/speculator.h"
#include "tokenizer/tokenizer.h"

namespace specd {

class Sequence {
 public:
  // `tokenizer` may be null (no text, no stop strings); `spec` null: plain
  // decoding. max_seq_len caps max_tokens (the last token needs no KV slot).
  Sequence(ServeRequest req, std::shared_ptr<RequestStream> stream, double submitted_s,
           int max_seq_len, const Tokenizer* tokenizer, std::unique_ptr<Speculator> spec);

  // Prepares the (re)start of the sequence on a fresh, empty KV sequence
  // `kv_seq`: prefill everything, or, when resumed after preemption, all but
  // history.back() (already sampled).
  void Start(int kv_seq);

  // Appends `tokens` (decided this step) to the history and the stream, until
  // one ends generation. logits + logit_rows[i] * vocab is token i's row (for
  // logprobs). Returns the finish reason ("stop" or "length") or "".
  std::string Emit(const std::vector<int32_t>& tokens, const float* logits,
                   const std::vector<int>& logit_rows, int vocab, double now);
  // Sends the final delta (flushing held text for "stop"/"length"). Idempotent.
  void Finish(const std::string& reason, const Status& error, double now);

  bool prefilling() const { return n_kv < prefill_end; }
  bool done() const { return done_; }

  ServeRequest req;
  std::shared_ptr<RequestStream> stream;
  std::vector<int32_t> history;  // prompt + generated
  int kv_seq = -1;
  int n_kv = 0;  // tokens of history in the KV cache
  int prefill_end = 0;
  bool sample_after_prefill = true;
  Sampler sampler;
  std::unique_ptr<Speculator> spec;
  SequenceStats stats;
  double submitted_s = 0;
  double started_s = 0;     // first step that ran it
  double last_token_s = 0;  // 0 until the first token
  double comm_at_first_token = 0;

  // Auto-shaped speculation: steps in a row below the deepest depth, and
  // after how many a probe drafts it anyway (the acceptance estimate only
  // learns from drafts).
  int plain_streak = 0;
  int probe_after = kFirstProbe;
  static constexpr int kFirstProbe = 32, kLastProbe = 1024;
  double step_predicted_speedup = 1;  // the cost model's, for this step's choice
  double step_draft_s = 0;            // this step's Draft call

  // The plan of the current step: tokens fed, batch index, first token's row.
  int step_tokens = 0, batch_index = -1, token_offset = 0;
  bool step_prefill = false;
  // A speculating sequence whose draft tree did not fit the free KV pages
  // this step: it takes a plain one-token step instead.
  bool step_plain = false;
  // An auto-shaped sequence whose chosen depth is 0: the step runs as plain
  // decoding (no draft tree, no verification, no KV edit).
  bool step_undrafted = false;

 private:
  int max_new_ = 0;
  std::unique_ptr<StreamDecoder> decoder_;
  StopStringMatcher stops_;
  bool done_ = false;
};

}  // namespace specd
