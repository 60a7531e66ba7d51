// Continuous batching on rank 0.
//
// Clients Submit requests into a bounded queue from any thread; one engine
// loop thread owns the Engine (and so every rank) and repeats a step:
//   1. drop cancelled requests (their KV pages are freed at once);
//   2. admit waiting requests while fewer than max_batch run and KV pages
//      allow;
//   3. plan one batch: every decoding sequence first (one token, or its whole
//      draft tree with speculation), then prompt chunks of prefilling ones
//      (at most prefill_chunk tokens each, max_step_tokens in all), so a long
//      prompt never stalls the others' decoding;
//   4. run one Engine::Forward over the batch; sample per sequence with its
//      own SamplingParams and seeded Sampler (or verify and commit its tree);
//   5. stream tokens to each request's RequestStream and retire finished
//      sequences, freeing their KV pages.
//
// KV pages are budgeted on rank 0 before each Forward, so a step never runs
// out of pages on any rank (a failed Reserve would end the worker ranks). When
// the decoding sequences need more pages than are free, the most recently
// admitted sequences are preempted: their KV is dropped and they go back to
// the front of the queue with what they generated so far, to be re-prefilled
// later (recompute, as vLLM does). Room for a draft tree never preempts: a
// sequence whose tree does not fit the free pages takes a plain step. A
// request never fails because of other requests.
//
// Every request is a Sequence (runtime/sequence.h, which states its
// invariants); between steps pages(seq) == ceil(n_kv / page_size).
//
// serve runs the loop on its own thread (Start); generate and bench run it on
// the caller's thread (RunToCompletion), so all three run the same code.
//
// If a Forward fails (a rank died), every request gets an "error" finish, the
// scheduler turns unhealthy and refuses new requests.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <functional>

#include "base/thread_annotations.h"
#include "runtime/engine.h"
#include "runtime/scheduler_metrics.h"
#include "runtime/scheduler_request.h"
#include "runtime/sequence.h"
#include "spec/spec_options.h"
#include "tokenizer/tokenizer.h"

namespace specd {

struct SchedulerOptions {
  int max_batch = 16;          // concurrent sequences (--max-batch)
  int max_queue = 256;         // waiting requests before Submit refuses (--max-queue)
  int prefill_chunk = 256;     // most prompt tokens of one sequence per step
  int max_step_tokens = 1024;  // tokens of one step, all sequences together
  SpecOptions spec;            // kNone: plain decoding
  // Where the pooled acceptance starts (what earlier runs of this target and
  // drafter measured; runtime/acceptance_cache.h); unset: the blind prior.
  std::optional<AcceptanceModel> acceptance_prior;
};

class Scheduler {
 public:
  // `engine`, `tokenizer` and `head` must outlive the scheduler. tokenizer may
  // be null (then requests cannot use stop strings); head is required for
  // EAGLE3 and must have set the runner's capture layers.
  Scheduler(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head,
            const SchedulerOptions& options);
  ~Scheduler();  // Stop(0)

  // Validates the options and starts the engine loop thread.
  Status Start();
  // Instead of Start: runs the engine loop on the calling thread until every
  // submitted request has finished, calling after_step() after each step
  // (where the caller reads its streams and may cancel). Returns the engine's
  // error if a step failed (every request then finished with "error").
  Status RunToCompletion(const std::function<void()>& after_step) EXCLUDES(mu_);

  // Thread-safe. Queues a request and returns its stream.
  // InvalidArgument / OutOfRange: the request does not fit the model (message
  // names the field); ResourceExhausted: the queue is full (retry later);
  // Unavailable: stopping, or the engine failed.
  StatusOr<std::shared_ptr<RequestStream>> Submit(ServeRequest request) EXCLUDES(mu_);

  // Stops accepting requests, lets in-flight ones run for up to grace_s
  // seconds, cancels the rest, and joins the engine loop. Idempotent.
  void Stop(double grace_s) EXCLUDES(mu_);

  // False once a step failed; failure() says why.
  bool healthy() const EXCLUDES(mu_);
  Status failure() const EXCLUDES(mu_);
  const SchedulerMetrics& metrics() const { return metrics_; }
  const SchedulerOptions& options() const { return options_; }
  // Most tokens a prompt may have (context length - 1, and the KV capacity).
  int max_prompt_tokens() const { return max_prompt_tokens_; }
  int context_length() const { return engine_->config().max_seq_len; }
  // Tokens the KV cache holds, all sequences together. Submit refuses a
  // request whose prompt + max_tokens (at most the context) exceeds it.
  int kv_capacity_tokens() const { return kv_capacity_tokens_; }
  // Acceptance by depth over every sequence's drafts so far (from
  // options().acceptance_prior when set): what a later run may start from.
  // REQUIRES: the engine loop is not running (before Start, after Stop or
  // RunToCompletion).
  const AcceptanceModel& pooled_acceptance() const { return pooled_acceptance_; }

 private:
  struct Waiting {
    ServeRequest request;
    std::shared_ptr<RequestStream> stream;
    double submitted_s = 0;
    std::unique_ptr<Sequence> resumed;  // set when preempted
  };

  Status Validate() const;
  // Auto-shaped speculation: the engine's step costs (measured once).
  Status PrepareStepCosts();
  // Each planned speculating sequence's draft depth this step (-1: its fixed
  // shape), from the cost model, with occasional probes out of plain mode.
  std::vector<int> ChooseDraftDepths(const std::vector<Sequence*>& plan);
  // A decode step of `seqs` sequences with auto-shaped speculation emitted
  // `emitted` tokens in `step_s`: moves the averages of the measured and
  // predicted speedup over plain decoding that metrics_ publishes.
  void ObserveSpeedup(size_t seqs, int emitted, double step_s);
  void Loop() EXCLUDES(mu_);
  void Admit() EXCLUDES(mu_);
  Status RunBatch();
  void Preempt(size_t index) EXCLUDES(mu_);
  void Finish(Sequence& r, const std::string& reason, const Status& error = Status::Ok());
  void EmitTokens(Sequence& r, const std::vector<int32_t>& tokens, const float* logits,
                  const std::vector<int>& logit_rows, double now);
  // Samples r's token from `logits` (the row of KV position `pos`), or ends r
  // with an error naming the request and position when the row cannot be
  // sampled (CheckLogitsRow). Returns false when r ended.
  bool SampleRow(Sequence& r, const float* logits, int pos, int32_t* token);
  // Ends r with `s`. Logged here when serving; RunToCompletion's caller
  // reports the request's error itself (Generate returns it).
  void FailRequest(Sequence& r, const Status& s);
  void FailAll(const Status& s) EXCLUDES(mu_);
  void PublishGauges();

  Engine* engine_;
  const Tokenizer* tokenizer_;
  Eagle3Head* head_;
  SchedulerOptions options_;
  int max_prompt_tokens_ = 0;
  bool inline_ = false;  // RunToCompletion, on the caller's thread
  int kv_capacity_tokens_ = 0;
  SchedulerMetrics metrics_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Waiting> waiting_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool cancel_all_ GUARDED_BY(mu_) = false;
  uint64_t submitted_ GUARDED_BY(mu_) = 0;  // requests accepted so far
  Status failure_ GUARDED_BY(mu_);
  std::thread thread_;

  // Engine loop thread only.
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  // Acceptance by depth over every sequence's drafts: a new sequence's
  // starting estimate (drafts are accepted alike across the requests of one
  // model and drafter far more often than not).
  AcceptanceModel pooled_acceptance_;
  // Averages of the measured and predicted speedup (ObserveSpeedup).
  double measured_speedup_ = 0, predicted_speedup_ = 0;
  ForwardOutput out_;
};

}  // namespace specd
