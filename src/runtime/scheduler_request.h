// What a client hands the scheduler (ServeRequest) and the channel through
// which the request's output travels back (RequestStream).
//
// The engine loop never blocks on a client: it appends to the stream's
// pending delta under a short lock; the client's thread takes everything
// pending at once (several engine steps coalesce when the client is slow).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "sampling/sampler.h"

namespace specd {

struct ServeRequest {
  // Names the request in its errors and log lines (a front end's request id);
  // empty: Submit numbers it "#1", "#2", ... in submission order.
  std::string id;
  std::vector<int32_t> prompt;  // token ids, at least one
  int max_tokens = 16;          // > 0; the context length caps it further
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;          // generation ends after emitting one
  std::vector<std::string> stop_strings;  // matched on decoded text, not returned
  // -1: no logprobs. k >= 0: each token's log-probability under the model's
  // raw (temperature 1, unfiltered) distribution plus the k most likely.
  int logprobs = -1;
};

// One request's statistics; complete in its finished delta.
struct SequenceStats {
  int n_prompt = 0;
  int n_generated = 0;
  double queue_s = 0;          // submission to the first step that ran it
  double prefill_s = 0;        // that step to the first token
  double decode_s = 0;         // the first generated token to the last
  int target_forwards = 0;     // decode-phase target forward passes it was part of
  size_t weight_bytes = 0;     // weight bytes one target forward reads (rank 0)
  double comm_s = 0;           // rank 0's time inside collectives while it decoded
  // Speculative decoding only: time drafting (its own), verifying (the
  // step's target forward plus its verification), and accept_hist[i] =
  // verify steps that committed i + 1 tokens.
  double draft_s = 0, verify_s = 0;
  std::vector<int> accept_hist;
  // Auto-shaped speculation: depth_hist[d] = decode steps that drafted a
  // chain of depth d (0: plain), and the cost model's predicted speedup over
  // plain decoding, summed over those steps.
  std::vector<int> depth_hist;
  double predicted_speedup_sum = 0;

  double prefill_tok_s() const { return prefill_s > 0 ? n_prompt / prefill_s : 0; }
  // Tokens after the first (which comes from prefill) per decode second.
  double decode_tok_s() const {
    return decode_s > 0 && n_generated > 1 ? (n_generated - 1) / decode_s : 0;
  }
  double decode_gb_s() const {
    return decode_s > 0 ? static_cast<double>(weight_bytes) * target_forwards / decode_s / 1e9 : 0;
  }
  double accept_length_mean() const;
  double predicted_speedup_mean() const;
};

struct TopLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;  // most likely first
};

// Output that became available since the client last looked.
struct OutputDelta {
  std::string text;                   // complete UTF-8, stop strings removed
  std::vector<int32_t> token_ids;     // tokens decided since last time
  std::vector<TokenLogprob> logprobs; // one per token when requested
  bool finished = false;
  // Set when finished: "stop" (stop id or string), "length" (max_tokens or
  // context), "cancelled" (client or shutdown), "error" (see `error`).
  std::string finish_reason;
  Status error;
  int prompt_tokens = 0;
  int completion_tokens = 0;  // every token generated, stop token included
  SequenceStats stats;        // set when finished
};

// Shared by the client's thread and the engine loop. Thread-safe.
class RequestStream {
 public:
  explicit RequestStream(int prompt_tokens) : prompt_tokens_(prompt_tokens) {}

  // Client side. Waits up to `timeout_s` for new output (<= 0: only looks);
  // false if nothing arrived. After a delta with finished = true, returns false forever.
  bool Next(OutputDelta* out, double timeout_s) EXCLUDES(mu_);
  // Asks the engine loop to drop the request at the next step boundary
  // (its KV pages are freed then); the stream then finishes "cancelled".
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // Engine side. Appends to the pending delta and wakes the client.
  void Push(const OutputDelta& d) EXCLUDES(mu_);
  int prompt_tokens() const { return prompt_tokens_; }

 private:
  const int prompt_tokens_;
  std::atomic<bool> cancelled_{false};
  Mutex mu_;
  std::condition_variable_any cv_;
  OutputDelta pending_ GUARDED_BY(mu_);
  bool has_pending_ GUARDED_BY(mu_) = false;
  bool done_ GUARDED_BY(mu_) = false;  // the finished delta was taken
};

}  // namespace specd
