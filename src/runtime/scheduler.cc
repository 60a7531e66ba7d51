#include "runtime/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "base/logging.h"
#include "base/op_profile.h"
#include "runtime/step_costs.h"
#include "sampling/logits_check.h"

namespace specd {
namespace {

constexpr int kMaxLogprobs = 20;
// How often an idle engine loop sends the other ranks an empty step
// (Engine::Heartbeat): well inside the communicator's deadline (60 s).
constexpr std::chrono::milliseconds kHeartbeatPeriod{1000};
// Most of the plain decoding time a sequence's probes may lose, by the cost
// model's estimate (auto-shaped speculation must stay within a few percent of
// plain decoding where drafting does not pay; on the demo pair a probe's
// real loss was 1.7x the estimate).
constexpr double kProbeBudget = 0.01;

}  // namespace

Scheduler::Scheduler(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head,
                     const SchedulerOptions& options)
    : engine_(engine),
      tokenizer_(tokenizer),
      head_(head),
      options_(options),
      pooled_acceptance_(options.spec.MaxDraftDepth()) {
  const KvCache& kv = engine_->kv();
  kv_capacity_tokens_ = kv.n_pages() * kv.page_size();
  max_prompt_tokens_ = std::min(engine_->config().max_seq_len - 1, kv_capacity_tokens_ - 1);
  metrics_.kv_total_pages = kv.n_pages();
  if (options.acceptance_prior.has_value())
    pooled_acceptance_ = options.acceptance_prior->WithMaxDepth(pooled_acceptance_.max_depth());
}

Scheduler::~Scheduler() { Stop(0); }

Status Scheduler::Validate() const {
  if (options_.max_batch < 1)
    return InvalidArgumentError(fmt::format("--max-batch: must be >= 1, got {}", options_.max_batch));
  if (options_.max_queue < 0)
    return InvalidArgumentError(fmt::format("--max-queue: must be >= 0, got {}", options_.max_queue));
  if (options_.prefill_chunk < 1 || options_.max_step_tokens < 1)
    return InvalidArgumentError("prefill chunk and step token budget must be >= 1");
  return ValidateSpecOptions(options_.spec, head_);
}

Status Scheduler::PrepareStepCosts() {
  if (!options_.spec.auto_shape || options_.spec.algorithm == SpecAlgorithm::kNone)
    return Status::Ok();
  const StepCosts* have = engine_->step_costs();
  if (have != nullptr && (head_ == nullptr || have->draft_step > 0)) return Status::Ok();
  ASSIGN_OR_RETURN(StepCosts costs,
                   MeasureStepCosts(*engine_, head_,
                                    StepCostTokens(options_.spec, options_.max_batch)));
  engine_->set_step_costs(std::move(costs));
  return Status::Ok();
}

std::vector<int> Scheduler::ChooseDraftDepths(const std::vector<Sequence*>& plan) {
  std::vector<int> depth(plan.size(), -1);
  if (!options_.spec.auto_shape || engine_->step_costs() == nullptr) return depth;
  // The speculating sequences choose together, with the costs as observed.
  // Their output does not depend on the depths: greedy verification keeps the
  // argmax, and a sampled token is a function of the seed, its position and
  // its logits row (sampling/sampler.h), so a seed reproduces its text
  // whatever was chosen.
  // Each sequence chooses among the drafts it can make now: an n-gram step
  // with no match is plain whatever the model expects of a match.
  std::vector<const AcceptanceModel*> models;
  std::vector<int> max_depth, index, deepest(plan.size(), 0);
  int other = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& r = *plan[i];
    if (r.step_prefill || !r.spec) {
      other += r.step_tokens;
    } else {
      // A plain step for want of free pages drafts nothing.
      deepest[i] = r.step_plain ? 0 : r.spec->DraftableDepth(r.history, r.n_kv);
      models.push_back(&r.spec->acceptance());
      max_depth.push_back(deepest[i]);
      index.push_back(static_cast<int>(i));
    }
  }
  int step_tokens = other, step_seqs = 0;
  if (!models.empty()) {
    const DepthChoice c =
        ChooseDepths(*engine_->step_costs(), models, max_depth, other, kDraftOptimism);
    metrics_.predicted_speedup = c.predicted_speedup();
    for (size_t j = 0; j < index.size(); ++j) {
      depth[index[j]] = c.depth[j];
      plan[index[j]]->step_predicted_speedup = c.predicted_speedup();
      step_tokens += c.depth[j] + 1;
    }
  }
  for (const Sequence* r : plan) step_seqs += r->step_prefill ? 0 : 1;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (depth[i] < 0) continue;
    Sequence& r = *plan[i];
    int d = depth[i];
    if (deepest[i] > 0 && d >= deepest[i]) {
      r.plain_streak = 0;
    } else if (++r.plain_streak >= r.probe_after && deepest[i] > 0) {
      // A probe: the acceptance of depths never drafted is only a guess, so
      // now and then draft them to learn whether they pay. N-gram drafts
      // cost nothing to make and are often accepted whole or not at all:
      // the deepest chain; an EAGLE-3 draft costs a head forward per token:
      // two. A probe the model expects to lose time waits until that loss
      // is at most kProbeBudget of the plain steps since the last one, so
      // where drafting is far from paying (a tiny target, against which a
      // draft-head step is expensive) probes stay rare.
      const int probe = r.spec->eagle() ? std::min(deepest[i], 2) : deepest[i];
      const StepCosts& costs = *engine_->step_costs();
      const double plain_s = r.plain_streak * costs.Target(step_tokens) / std::max(1, step_seqs);
      if (ProbeLoss(costs, r.spec->acceptance(), probe, step_tokens, step_seqs) <=
          kProbeBudget * plain_s) {
        d = probe;
        r.plain_streak = 0;
        r.probe_after = std::min(2 * r.probe_after, int{Sequence::kLastProbe});
      }
    }
    depth[i] = d;
    std::vector<int>& hist = r.stats.depth_hist;
    if (static_cast<int>(hist.size()) <= d) hist.resize(d + 1, 0);
    hist[d]++;
    r.stats.predicted_speedup_sum += r.step_predicted_speedup;
    metrics_.draft_depth.Observe(d);
  }
  return depth;
}

Status Scheduler::Start() {
  RETURN_IF_ERROR(Validate());
  RETURN_IF_ERROR(PrepareStepCosts().WithStage("step costs"));
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

Status Scheduler::RunToCompletion(const std::function<void()>& after_step) {
  inline_ = true;
  RETURN_IF_ERROR(Validate());
  RETURN_IF_ERROR(PrepareStepCosts().WithStage("step costs"));
  while (true) {
    {
      MutexLock lock(&mu_);
      if (waiting_.empty() && running_.empty()) break;
    }
    Admit();
    out_.seq_row.clear();
    Status s;
    if (!running_.empty()) s = RunBatch();
    if (!s.ok()) FailAll(s);
    PublishGauges();
    after_step();
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<RequestStream>> Scheduler::Submit(ServeRequest req) {
  const ModelConfig& c = engine_->config();
  if (req.prompt.empty()) return InvalidArgumentError("prompt: empty (expected at least one token)");
  for (int32_t t : req.prompt) {
    if (t < 0 || t >= c.vocab_size)
      return InvalidArgumentError(
          fmt::format("prompt: token id {} out of range [0, {})", t, c.vocab_size));
  }
  if (static_cast<int64_t>(req.prompt.size()) > max_prompt_tokens_)
    return OutOfRangeError(fmt::format(
        "prompt: {} tokens do not fit: the context length is {} tokens, so a prompt may have at "
        "most {}",
        req.prompt.size(), c.max_seq_len, max_prompt_tokens_));
  if (req.max_tokens <= 0)
    return InvalidArgumentError(fmt::format("max_tokens: must be > 0, got {}", req.max_tokens));
  // A request that fits alone always completes: preemption gives the oldest
  // sequence the whole cache (RunBatch).
  const int64_t need =
      std::min<int64_t>(static_cast<int64_t>(req.prompt.size()) + req.max_tokens, c.max_seq_len);
  if (need > kv_capacity_tokens_)
    return OutOfRangeError(fmt::format(
        "max_tokens: {} prompt tokens + max_tokens {} = {} tokens do not fit the KV cache of {} "
        "tokens (--kv-cache-tokens / --kv-cache-memory): lower max_tokens to at most {}",
        req.prompt.size(), req.max_tokens, static_cast<int64_t>(req.prompt.size()) + req.max_tokens,
        kv_capacity_tokens_, kv_capacity_tokens_ - static_cast<int64_t>(req.prompt.size())));
  RETURN_IF_ERROR(req.sampling.Validate());
  if (!req.stop_strings.empty() && tokenizer_ == nullptr)
    return InvalidArgumentError("stop: stop strings need a tokenizer, and this model has none");
  if (req.logprobs > kMaxLogprobs)
    return InvalidArgumentError(
        fmt::format("logprobs: at most {} supported, got {}", kMaxLogprobs, req.logprobs));
  auto stream = std::make_shared<RequestStream>(static_cast<int>(req.prompt.size()));
  {
    MutexLock lock(&mu_);
    if (!failure_.ok())
      return UnavailableError("the engine failed: " + failure_.message());
    if (stopping_) return UnavailableError("the server is shutting down");
    if (static_cast<int>(waiting_.size()) >= options_.max_queue)
      return ResourceExhaustedError(fmt::format(
          "request queue full ({} waiting, --max-queue {}): retry later", waiting_.size(),
          options_.max_queue));
    ++submitted_;
    if (req.id.empty()) req.id = "#" + std::to_string(submitted_);
    metrics_.prompt_tokens += static_cast<int64_t>(req.prompt.size());
    waiting_.push_back(Waiting{std::move(req), stream, NowSeconds(), nullptr});
    metrics_.queue_depth = static_cast<int>(waiting_.size());
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::Stop(double grace_s) {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  const double deadline = NowSeconds() + grace_s;
  while (NowSeconds() < deadline) {
    if (metrics_.running.load() == 0 && metrics_.queue_depth.load() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    MutexLock lock(&mu_);
    cancel_all_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Scheduler::healthy() const {
  MutexLock lock(&mu_);
  return failure_.ok();
}

Status Scheduler::failure() const {
  MutexLock lock(&mu_);
  return failure_;
}

void Scheduler::Loop() {
  bool idle = false;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (cancel_all_) {
        for (Waiting& w : waiting_) w.stream->Cancel();
        for (auto& r : running_) r->stream->Cancel();
      }
      if (stopping_ && waiting_.empty() && running_.empty()) break;
      if (waiting_.empty() && running_.empty()) {
        PublishGauges();
        // Written out instead of a predicate lambda, which the thread-safety
        // analysis would check as a function that does not hold mu_.
        const auto deadline = std::chrono::steady_clock::now() + kHeartbeatPeriod;
        while (!stopping_ && waiting_.empty()) {
          if (cv_.wait_until(mu_, deadline) == std::cv_status::timeout) break;
        }
        idle = !stopping_ && waiting_.empty();
        if (!idle) continue;
      }
    }
    if (idle) {
      // Idle for a heartbeat period: keep the other ranks' step wait alive
      // and notice a rank that died meanwhile.
      idle = false;
      Status s = engine_->Heartbeat();
      if (!s.ok()) {
        FailAll(s.WithStage("engine heartbeat"));
        break;
      }
      continue;
    }
    Admit();
    out_.seq_row.clear();
    if (!running_.empty()) {
      Status s = RunBatch();
      if (!s.ok()) {
        FailAll(s);
        break;
      }
    }
    PublishGauges();
    if (!running_.empty() && out_.seq_row.empty()) {
      // Nothing could run this step (every sequence waits for pages):
      // wait for a cancellation, a finish elsewhere or a new request.
      MutexLock lock(&mu_);
      cv_.wait_for(mu_, std::chrono::milliseconds(20));
    }
  }
  PublishGauges();
}

void Scheduler::PublishGauges() {
  metrics_.running = static_cast<int>(running_.size());
  metrics_.kv_used_pages = engine_->kv().used_pages();
  metrics_.comm_seconds = engine_->runner().comm()->comm_seconds();
}

void Scheduler::Admit() {
  KvCache& kv = engine_->kv();
  const int ps = kv.page_size();
  const int max_tree =
      options_.spec.algorithm == SpecAlgorithm::kNone ? 1 : options_.spec.tree.num_draft_tokens;
  MutexLock lock(&mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->stream->cancelled()) {
      OutputDelta d;
      d.finished = true;
      d.finish_reason = "cancelled";
      d.prompt_tokens = it->stream->prompt_tokens();
      d.completion_tokens = it->resumed ? it->resumed->stats.n_generated : 0;
      it->stream->Push(d);
      metrics_.finished_cancelled++;
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  while (static_cast<int>(running_.size()) < options_.max_batch && !waiting_.empty()) {
    // Leave the running sequences the pages their next steps need; a wrong
    // guess only costs a preemption later.
    const int reserve = static_cast<int>(running_.size()) * ((max_tree + ps - 1) / ps + 1);
    if (!running_.empty() && kv.free_pages() <= reserve) break;
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    std::unique_ptr<Sequence> r = std::move(w.resumed);
    if (!r) {
      std::unique_ptr<Speculator> spec;
      // Worth 8 steps of the new sequence's own: it soon speaks for itself.
      const AcceptanceModel prior = pooled_acceptance_.AsPrior(8);
      const bool use_prior = pooled_acceptance_.observations() > 0;
      if (options_.spec.algorithm != SpecAlgorithm::kNone)
        spec = std::make_unique<Speculator>(
            options_.spec, head_, engine_->config(),
            use_prior ? &prior : nullptr);
      r = std::make_unique<Sequence>(std::move(w.request), w.stream, w.submitted_s,
                                     engine_->config().max_seq_len, tokenizer_, std::move(spec));
      r->stats.weight_bytes = engine_->runner().model().weight_bytes();
    }
    r->Start(engine_->NewSequence());
    running_.push_back(std::move(r));
  }
  metrics_.queue_depth = static_cast<int>(waiting_.size());
  metrics_.running = static_cast<int>(running_.size());
}

void Scheduler::Preempt(size_t index) {
  std::unique_ptr<Sequence> r = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<ptrdiff_t>(index));
  engine_->FreeSequence(r->kv_seq);
  r->kv_seq = -1;
  r->n_kv = 0;
  metrics_.preemptions++;
  LOG_DEBUG("scheduler", "KV cache full: preempted a sequence of {} tokens", r->history.size());
  MutexLock lock(&mu_);
  Waiting w;
  w.stream = r->stream;
  w.submitted_s = r->submitted_s;
  w.resumed = std::move(r);
  waiting_.push_front(std::move(w));
  metrics_.queue_depth = static_cast<int>(waiting_.size());
}

void Scheduler::Finish(Sequence& r, const std::string& reason, const Status& error) {
  if (r.done()) return;
  if (r.last_token_s > 0)
    r.stats.comm_s = engine_->runner().comm()->comm_seconds() - r.comm_at_first_token;
  r.Finish(reason, error, NowSeconds());
  if (r.kv_seq >= 0) engine_->FreeSequence(r.kv_seq);
  r.kv_seq = -1;
  if (reason == "stop") metrics_.finished_stop++;
  else if (reason == "length") metrics_.finished_length++;
  else if (reason == "cancelled") metrics_.finished_cancelled++;
  else metrics_.finished_error++;
}

void Scheduler::EmitTokens(Sequence& r, const std::vector<int32_t>& tokens, const float* logits,
                           const std::vector<int>& logit_rows, double now) {
  const bool first = r.last_token_s == 0;
  const double last = r.last_token_s;
  const int before = r.stats.n_generated;
  const std::string finish = r.Emit(tokens, logits, logit_rows, engine_->config().vocab_size, now);
  const int emitted = r.stats.n_generated - before;
  metrics_.generation_tokens += emitted;
  if (first) {
    metrics_.ttft.Observe(now - r.submitted_s);
    r.comm_at_first_token = engine_->runner().comm()->comm_seconds();
  } else {
    for (int i = 0; i < emitted; ++i) metrics_.itl.Observe((now - last) / emitted);
  }
  if (!finish.empty()) Finish(r, finish);
}

namespace {

// The error that ends a request whose logits cannot be sampled: `why` is
// CheckLogitsRow's "contain NaN (token 5)".
Status NonFiniteLogitsError(const Sequence& r, int pos, const Status& why) {
  return Status(why.code(),
                fmt::format("logits of request {} at position {} {}: the model's weights or "
                            "activations are not finite; run with --check-tensors full to find a "
                            "weight that holds NaN/Inf",
                            r.req.id, pos, why.message()))
      .WithStage("sampling");
}

}  // namespace

bool Scheduler::SampleRow(Sequence& r, const float* logits, int pos, int32_t* token) {
  const int V = engine_->config().vocab_size;
  if (Status s = CheckLogitsRow(logits, V); !s.ok()) {
    FailRequest(r, NonFiniteLogitsError(r, pos, s));
    return false;
  }
  *token = r.sampler.Sample(logits, V, r.req.sampling, pos + 1);
  return true;
}

Status Scheduler::RunBatch() {
  KvCache& kv = engine_->kv();
  const int ps = kv.page_size();
  auto pages = [ps](int n) { return (n + ps - 1) / ps; };

  // Cancellations take effect here, at the step boundary.
  for (auto& r : running_)
    if (r->stream->cancelled()) Finish(*r, "cancelled");
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& r) { return r->done(); });

  // Token budget: decoding sequences first, prompt chunks share the rest.
  int decode_tokens = 0;
  for (auto& r : running_)
    if (!r->prefilling()) decode_tokens += r->spec ? r->spec->MaxTreeSize(r->n_kv) : 1;
  int prefill_budget = std::max(0, options_.max_step_tokens - decode_tokens);

  // Plan in admission order (first come, first served): a sequence that
  // cannot get the pages it needs preempts the newest ones; the newest one
  // waits; the oldest one alone cannot run out unless the cache is smaller
  // than its context (then it ends with "length").
  std::vector<Sequence*> plan;
  int reserved = 0;
  for (size_t i = 0; i < running_.size();) {
    Sequence& r = *running_[i];
    r.step_tokens = 0;
    r.step_plain = false;
    r.step_undrafted = false;
    int n;
    const int free_pages = kv.free_pages() - reserved;
    bool plain = false;
    if (!r.prefilling()) {
      n = r.spec ? r.spec->MaxTreeSize(r.n_kv) : 1;
      // A draft is optional: where the pages its tree needs are not free, the
      // sequence takes a plain one-token step (depth 0) instead of preempting
      // a newer sequence for them (whose re-prefill costs more than any
      // draft can win). Only a sequence that cannot grow by one token preempts.
      if (pages(r.n_kv + n) - pages(r.n_kv) > free_pages) {
        plain = n > 1 && pages(r.n_kv + 1) - pages(r.n_kv) <= free_pages;
        n = plain ? 1 : 0;
      }
    } else {
      n = std::min({options_.prefill_chunk, r.prefill_end - r.n_kv, prefill_budget});
      const int room = pages(r.n_kv) * ps - r.n_kv + free_pages * ps;
      if (prefill_budget > 0) n = std::min(n, room);
      else n = -1;  // no budget left: wait, not blocked
    }
    if (n > 0) {
      r.step_tokens = n;
      r.step_plain = plain;
      r.step_prefill = r.prefilling();
      reserved += pages(r.n_kv + n) - pages(r.n_kv);
      if (r.step_prefill) prefill_budget -= n;
      plan.push_back(&r);
      ++i;
      continue;
    }
    if (n < 0) {
      ++i;
      continue;
    }
    if (i + 1 < running_.size()) {
      Preempt(running_.size() - 1);
      continue;
    }
    if (plan.empty() && i == 0) {
      LOG_WARN("scheduler", "KV cache full: a sequence of {} tokens cannot grow alone; ending it",
               r.n_kv);
      Finish(r, "length");
    }
    ++i;
  }

  // --profile: a step is the drafting, the forward pass and the sampling or
  // verification of everything in it; it counts as prefill when it feeds a
  // prompt chunk (the first token's sampling and the draft head's prefill
  // included).
  OpProfile& prof = engine_->runner().profile();
  const int64_t step_start = prof.enabled() ? NowNanos() : 0;
  const double step_start_s = NowSeconds();
  bool any_prefill = false;
  for (Sequence* r : plan) any_prefill |= r->step_prefill;
  prof.set_phase(any_prefill ? ProfPhase::kPrefill : ProfPhase::kDecode);

  // Build the batch.
  const std::vector<int> depth = ChooseDraftDepths(plan);
  std::vector<SeqInput> batch;
  batch.reserve(plan.size());
  int offset = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence* r = plan[i];
    if (r->started_s == 0) {
      r->started_s = step_start_s;
      r->stats.queue_s = step_start_s - r->submitted_s;
    }
    SeqInput in;
    in.seq = r->kv_seq;
    r->step_undrafted = !r->step_prefill && r->spec && depth[i] == 0;
    if (r->step_prefill) {
      in.tokens.assign(r->history.begin() + r->n_kv, r->history.begin() + r->n_kv + r->step_tokens);
    } else if (r->spec && !r->step_undrafted) {
      Stopwatch draft;
      Status s;
      {
        OpTimer timer(&prof, ProfOp::kDraft);
        s = r->spec->Draft(r->history, r->n_kv, r->kv_seq, &in, r->step_plain ? 0 : depth[i]);
      }
      r->step_draft_s = draft.Seconds();
      r->stats.draft_s += r->step_draft_s;
      if (!s.ok()) {
        FailRequest(*r, s);
        continue;
      }
      r->step_tokens = static_cast<int>(in.tokens.size());
    } else {
      // Plain, or undrafted: planned for its largest draft, it feeds one token.
      in.tokens = {r->history.back()};
      r->step_tokens = 1;
    }
    r->batch_index = static_cast<int>(batch.size());
    r->token_offset = offset;
    offset += r->step_tokens;
    batch.push_back(std::move(in));
  }
  std::erase_if(plan, [](Sequence* r) { return r->done(); });
  out_.seq_row.clear();
  if (batch.empty()) {
    std::erase_if(running_, [](const std::unique_ptr<Sequence>& r) { return r->done(); });
    return Status::Ok();
  }

  const bool eagle = options_.spec.algorithm == SpecAlgorithm::kEagle3;
  Stopwatch forward;
  RETURN_IF_ERROR(engine_->Forward(batch, eagle, &out_).WithStage("engine step"));
  const double forward_s = forward.Seconds();
  if (StepCosts* costs = engine_->mutable_step_costs(); costs && options_.spec.auto_shape)
    costs->Observe(offset, forward_s);
  metrics_.steps++;
  const double now = NowSeconds();
  const int V = engine_->config().vocab_size;
  const size_t aux_stride = 3 * static_cast<size_t>(engine_->config().hidden_dim);

  int emitted = 0, spec_seqs = 0;  // decode tokens this step; speculating sequences
  for (Sequence* rp : plan) {
    Sequence& r = *rp;
    const int row0 = out_.seq_row[r.batch_index];
    const float* logits = &out_.logits[static_cast<size_t>(row0) * V];
    const float* aux =
        eagle ? out_.aux_hidden.data() + static_cast<size_t>(r.token_offset) * aux_stride : nullptr;
    Status s;
    if (r.step_prefill) {
      const int a = r.n_kv;
      r.n_kv += r.step_tokens;
      if (r.n_kv == r.prefill_end && r.sample_after_prefill) {
        int32_t t;
        bool sampled;
        {
          OpTimer timer(&prof, ProfOp::kSampling);
          sampled = SampleRow(r, logits, r.n_kv - 1, &t);
        }
        if (sampled) EmitTokens(r, {t}, out_.logits.data(), {row0}, now);
      }
      if (r.spec && !r.done()) {
        // Row k of the chunk predicts history[a + k + 1].
        {
          OpTimer timer(&prof, ProfOp::kDraft);
          std::vector<int32_t> next(r.history.begin() + a + 1, r.history.begin() + r.n_kv + 1);
          s = r.spec->ExtendPrefill(aux, next, a);
        }
        // The draft head's prefill belongs to the prefill phase: decoding
        // starts once it is done.
        if (r.n_kv == r.prefill_end && r.stats.n_generated == 1)
          r.stats.prefill_s = NowSeconds() - r.started_s;
      }
    } else if (r.spec && !r.step_undrafted) {
      const int L = r.n_kv;
      r.stats.target_forwards++;
      Stopwatch verify;
      double extend_s = 0;
      SpecStep step;
      {
        OpTimer timer(&prof, ProfOp::kVerify);
        s = r.spec->Verify(r.kv_seq, L, logits, r.req.sampling, &r.sampler, &step);
        if (!s.ok())
          s = NonFiniteLogitsError(r, L + static_cast<int>(step.verify.path.size()) - 1, s);
        else
          s = engine_->Apply(std::move(step.kv)).WithStage("verify");
      }
      const double verify_s = verify.Seconds();
      r.stats.verify_s += forward_s + verify_s;
      const VerifyResult& vr = step.verify;
      if (step.drafted > 0) pooled_acceptance_.Observe(step.drafted, step.accepted);
      if (s.ok()) {
        r.n_kv = L + static_cast<int>(vr.path.size());
        metrics_.accept_length.Observe(static_cast<double>(vr.emitted.size()));
        std::vector<int>& hist = r.stats.accept_hist;
        if (hist.size() < vr.emitted.size()) hist.resize(vr.emitted.size(), 0);
        hist[vr.emitted.size() - 1]++;
        std::vector<int> rows;
        for (int p : vr.path) rows.push_back(row0 + p);
        EmitTokens(r, vr.emitted, out_.logits.data(), rows, now);
        emitted += static_cast<int>(vr.emitted.size());
        ++spec_seqs;
        if (!r.done()) {
          Stopwatch extend;
          OpTimer timer(&prof, ProfOp::kDraft);
          s = r.spec->ExtendAccepted(vr, aux, L);
          extend_s = extend.Seconds();
          r.stats.draft_s += extend_s;
        }
      }
      // What drafting, verifying and feeding the head back cost beyond the
      // target's forward: the cost model's per-draft-token price.
      if (options_.spec.auto_shape && GetLogLevel() == LogLevel::kDebug)
        LOG_DEBUG("auto shape",
                  "request {} at {}: {} drafted, {} accepted; forward over {} tokens {:.3f} ms "
                  "(predicted {:.3f}), draft + verify + feed {:.3f} ms, predicted speedup {:.2f}",
                  r.req.id, L, step.drafted, step.accepted, offset, forward_s * 1e3,
                  engine_->step_costs()->Target(offset) * 1e3,
                  (r.step_draft_s + verify_s + extend_s) * 1e3, r.step_predicted_speedup);
      // (Not a draft that first caught the head up on plain steps: that
      // forward over up to kMaxPendingRows rows is priced as the catch-up.)
      if (StepCosts* costs = engine_->mutable_step_costs();
          costs && options_.spec.auto_shape && r.step_tokens > 1 &&
          !r.spec->last_draft_caught_up())
        costs->ObserveDraft(r.step_tokens - 1, r.step_draft_s + verify_s + extend_s);
    } else {
      r.n_kv += 1;
      r.stats.target_forwards++;
      int32_t t;
      bool sampled;
      Stopwatch plain;
      {
        OpTimer timer(&prof, ProfOp::kSampling);
        sampled = SampleRow(r, logits, r.n_kv - 1, &t);
      }
      double plain_s = plain.Seconds();
      if (sampled) EmitTokens(r, {t}, out_.logits.data(), {row0}, now);
      emitted += sampled ? 1 : 0;
      if (r.spec && sampled) {
        // A plain step of a speculating sequence: one token accepted.
        metrics_.accept_length.Observe(1.0);
        std::vector<int>& hist = r.stats.accept_hist;
        if (hist.empty()) hist.resize(1, 0);
        hist[0]++;
        ++spec_seqs;
        if (!r.done()) {
          Stopwatch accept;
          r.spec->AcceptPlain(aux, t, r.n_kv - 1);
          plain_s += accept.Seconds();
        }
        // What the plain step cost besides the forward and emitting its
        // token, against which a draft's verification and feeding is priced.
        if (StepCosts* costs = engine_->mutable_step_costs(); costs && options_.spec.auto_shape)
          costs->ObservePlain(plain_s);
      }
    }
    if (!s.ok()) FailRequest(r, s);
  }
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& r) { return r->done(); });
  if (prof.enabled()) prof.AddStep(NowNanos() - step_start);
  if (!any_prefill && spec_seqs > 0)
    ObserveSpeedup(plan.size(), emitted, NowSeconds() - step_start_s);
  return Status::Ok();
}

void Scheduler::ObserveSpeedup(size_t seqs, int emitted, double step_s) {
  // Each gauge follows roughly the last 32 decode steps.
  constexpr double kWeight = 1.0 / 32;
  const StepCosts* costs = engine_->step_costs();
  if (!options_.spec.auto_shape || costs == nullptr || seqs == 0 || !(step_s > 0)) return;
  const int n = static_cast<int>(seqs);
  const double measured = (emitted / step_s) / (n / costs->Target(n));
  auto follow = [](double* avg, double x) { *avg = *avg > 0 ? *avg + kWeight * (x - *avg) : x; };
  follow(&measured_speedup_, measured);
  follow(&predicted_speedup_, metrics_.predicted_speedup.load());
  metrics_.measured_speedup_avg = measured_speedup_;
  metrics_.predicted_speedup_avg = predicted_speedup_;
}

void Scheduler::FailRequest(Sequence& r, const Status& s) {
  if (!inline_) LogStatus(s);
  Finish(r, "error", s);
}

void Scheduler::FailAll(const Status& s) {
  LogStatus(s);
  for (auto& r : running_) Finish(*r, "error", s);
  running_.clear();
  MutexLock lock(&mu_);
  failure_ = s;
  for (Waiting& w : waiting_) {
    OutputDelta d;
    d.finished = true;
    d.finish_reason = "error";
    d.error = s;
    d.prompt_tokens = w.stream->prompt_tokens();
    w.stream->Push(d);
    metrics_.finished_error++;
  }
  waiting_.clear();
  metrics_.queue_depth = 0;
}

}  // namespace specd
