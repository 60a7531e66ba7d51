#include "runtime/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/clock.h"
#include "base/logging.h"
#include "runtime/scheduler_stop.h"
#include "runtime/spec_batch.h"

namespace specd {
namespace {

constexpr int kMaxLogprobs = 20;
// How often an idle engine loop sends the other ranks an empty step
// (Engine::Heartbeat): well inside the communicator's deadline (60 s).
constexpr std::chrono::milliseconds kHeartbeatPeriod{1000};

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

struct Scheduler::Running {
  ServeRequest req;
  std::shared_ptr<RequestStream> stream;
  double submitted_s = 0, last_token_s = 0;
  int kv_seq = -1;
  int n_kv = 0;                  // tokens of history in the KV cache
  std::vector<int32_t> history;  // prompt + generated
  int n_prompt = 0, n_generated = 0, max_new = 0;
  // Prefill feeds history[n_kv, prefill_end); then, if sample_after_prefill,
  // the last row's logits give the next token. A sequence resumed after
  // preemption already knows history.back(), so it prefills one token less
  // and does not sample.
  int prefill_end = 0;
  bool sample_after_prefill = true;
  Sampler sampler{0};
  std::unique_ptr<StreamDecoder> decoder;
  std::unique_ptr<StopStringMatcher> stops;
  std::unique_ptr<SpecSequence> spec;
  bool done = false;
  // This step: tokens fed, the batch index and the first token's offset.
  int step_tokens = 0, batch_index = -1, token_offset = 0;
  bool step_prefill = false;

  bool prefilling() const { return n_kv < prefill_end; }
};

Scheduler::Scheduler(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head,
                     const SchedulerOptions& options)
    : engine_(engine), tokenizer_(tokenizer), head_(head), options_(options) {
  const KvCache& kv = engine_->kv();
  const int kv_tokens = kv.n_pages() * kv.page_size();
  max_prompt_tokens_ = std::min(engine_->config().max_seq_len - 1, kv_tokens - 1);
  metrics_.kv_total_pages = kv.n_pages();
}

Scheduler::~Scheduler() { Stop(0); }

Status Scheduler::Start() {
  if (options_.max_batch < 1)
    return InvalidArgumentError(fmt::format("--max-batch: must be >= 1, got {}", options_.max_batch));
  if (options_.max_queue < 0)
    return InvalidArgumentError(fmt::format("--max-queue: must be >= 0, got {}", options_.max_queue));
  if (options_.prefill_chunk < 1 || options_.max_step_tokens < 1)
    return InvalidArgumentError("prefill chunk and step token budget must be >= 1");
  if (options_.spec.algorithm != SpecAlgorithm::kNone) {
    RETURN_IF_ERROR(options_.spec.tree.Validate());
    if (options_.spec.algorithm == SpecAlgorithm::kEagle3 && head_ == nullptr)
      return InvalidArgumentError("EAGLE3 needs --draft-model");
  }
  thread_ = std::thread([this] { Loop(); });
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
  RETURN_IF_ERROR(req.sampling.Validate());
  if (!req.stop_strings.empty() && tokenizer_ == nullptr)
    return InvalidArgumentError("stop: stop strings need a tokenizer, and this model has none");
  if (req.logprobs > kMaxLogprobs)
    return InvalidArgumentError(
        fmt::format("logprobs: at most {} supported, got {}", kMaxLogprobs, req.logprobs));
  auto stream = std::make_shared<RequestStream>(static_cast<int>(req.prompt.size()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok())
      return UnavailableError("the engine failed: " + failure_.message());
    if (stopping_) return UnavailableError("the server is shutting down");
    if (static_cast<int>(waiting_.size()) >= options_.max_queue)
      return ResourceExhaustedError(fmt::format(
          "request queue full ({} waiting, --max-queue {}): retry later", waiting_.size(),
          options_.max_queue));
    metrics_.prompt_tokens += static_cast<int64_t>(req.prompt.size());
    waiting_.push_back(Waiting{std::move(req), stream, NowSeconds(), nullptr});
    metrics_.queue_depth = static_cast<int>(waiting_.size());
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::Stop(double grace_s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    cancel_all_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Scheduler::healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_.ok();
}

Status Scheduler::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void Scheduler::Loop() {
  bool idle = false;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cancel_all_) {
        for (Waiting& w : waiting_) w.stream->Cancel();
        for (auto& r : running_) r->stream->Cancel();
      }
      if (stopping_ && waiting_.empty() && running_.empty()) break;
      if (waiting_.empty() && running_.empty()) {
        PublishGauges();
        idle = !cv_.wait_for(lock, kHeartbeatPeriod, [&] { return stopping_ || !waiting_.empty(); });
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
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(20));
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
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->stream->cancelled()) {
      OutputDelta d;
      d.finished = true;
      d.finish_reason = "cancelled";
      d.prompt_tokens = it->stream->prompt_tokens();
      d.completion_tokens = it->resumed ? it->resumed->n_generated : 0;
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
    std::unique_ptr<Running> r = std::move(w.resumed);
    if (!r) {
      r = std::make_unique<Running>();
      r->req = std::move(w.request);
      r->stream = w.stream;
      r->submitted_s = w.submitted_s;
      r->history = r->req.prompt;
      r->n_prompt = static_cast<int>(r->history.size());
      const int64_t room = engine_->config().max_seq_len - int64_t{r->n_prompt} + 1;
      r->max_new = static_cast<int>(std::min<int64_t>(r->req.max_tokens, room));
      r->sampler = Sampler(r->req.sampling.seed);
      if (tokenizer_) r->decoder = std::make_unique<StreamDecoder>(tokenizer_);
      r->stops = std::make_unique<StopStringMatcher>(r->req.stop_strings);
      if (options_.spec.algorithm != SpecAlgorithm::kNone)
        r->spec = std::make_unique<SpecSequence>(options_.spec, head_, engine_->config());
    }
    r->kv_seq = engine_->NewSequence();
    r->n_kv = 0;
    if (r->n_generated == 0) {
      r->prefill_end = static_cast<int>(r->history.size());
      r->sample_after_prefill = true;
    } else {
      r->prefill_end = static_cast<int>(r->history.size()) - 1;
      r->sample_after_prefill = false;
    }
    if (r->spec) r->spec->Reset();
    running_.push_back(std::move(r));
  }
  metrics_.queue_depth = static_cast<int>(waiting_.size());
  metrics_.running = static_cast<int>(running_.size());
}

void Scheduler::Preempt(size_t index) {
  std::unique_ptr<Running> r = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<ptrdiff_t>(index));
  engine_->FreeSequence(r->kv_seq);
  r->kv_seq = -1;
  r->n_kv = 0;
  metrics_.preemptions++;
  LOG_DEBUG("scheduler", "KV cache full: preempted a sequence of {} tokens", r->history.size());
  std::lock_guard<std::mutex> lock(mu_);
  Waiting w;
  w.stream = r->stream;
  w.submitted_s = r->submitted_s;
  w.resumed = std::move(r);
  waiting_.push_front(std::move(w));
  metrics_.queue_depth = static_cast<int>(waiting_.size());
}

void Scheduler::Finish(Running& r, const std::string& reason, const Status& error) {
  if (r.done) return;
  r.done = true;
  OutputDelta d;
  if (reason == "stop" || reason == "length") {
    std::string rest = r.decoder ? r.decoder->Flush() : "";
    d.text = r.stops->Push(rest);
    d.text += r.stops->Flush();
  }
  d.finished = true;
  d.finish_reason = reason;
  d.error = error;
  d.prompt_tokens = r.n_prompt;
  d.completion_tokens = r.n_generated;
  r.stream->Push(d);
  if (r.kv_seq >= 0) engine_->FreeSequence(r.kv_seq);
  r.kv_seq = -1;
  if (reason == "stop") metrics_.finished_stop++;
  else if (reason == "length") metrics_.finished_length++;
  else if (reason == "cancelled") metrics_.finished_cancelled++;
  else metrics_.finished_error++;
}

void Scheduler::EmitTokens(Running& r, const std::vector<int32_t>& tokens, const float* logits,
                           const std::vector<int>& logit_rows, double now) {
  const int V = engine_->config().vocab_size;
  OutputDelta d;
  std::string finish;
  size_t emitted = 0;
  for (size_t i = 0; i < tokens.size() && finish.empty(); ++i) {
    const int32_t t = tokens[i];
    ++emitted;
    r.n_generated++;
    r.history.push_back(t);
    d.token_ids.push_back(t);
    if (r.req.logprobs >= 0)
      d.logprobs.push_back(
          ComputeLogprob(logits + static_cast<size_t>(logit_rows[i]) * V, V, t, r.req.logprobs));
    if (r.decoder) d.text += r.stops->Push(r.decoder->Push(t));
    if (r.stops->stopped()) finish = "stop";
    else if (std::find(r.req.stop_ids.begin(), r.req.stop_ids.end(), t) != r.req.stop_ids.end())
      finish = "stop";
    else if (r.n_generated >= r.max_new) finish = "length";
  }
  metrics_.generation_tokens += static_cast<int64_t>(emitted);
  if (r.last_token_s == 0) {
    metrics_.ttft.Observe(now - r.submitted_s);
  } else {
    for (size_t i = 0; i < emitted; ++i)
      metrics_.itl.Observe((now - r.last_token_s) / static_cast<double>(emitted));
  }
  r.last_token_s = now;
  d.prompt_tokens = r.n_prompt;
  d.completion_tokens = r.n_generated;
  r.stream->Push(d);
  if (!finish.empty()) Finish(r, finish);
}

Status Scheduler::RunBatch() {
  KvCache& kv = engine_->kv();
  const int ps = kv.page_size();
  auto pages = [ps](int n) { return (n + ps - 1) / ps; };

  // Cancellations take effect here, at the step boundary.
  for (auto& r : running_)
    if (r->stream->cancelled()) Finish(*r, "cancelled");
  std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->done; });

  // Token budget: decoding sequences first, prompt chunks share the rest.
  int decode_tokens = 0;
  for (auto& r : running_)
    if (!r->prefilling()) decode_tokens += r->spec ? r->spec->MaxTreeSize(r->n_kv) : 1;
  int prefill_budget = std::max(0, options_.max_step_tokens - decode_tokens);

  // Plan in admission order (first come, first served): a sequence that
  // cannot get the pages it needs preempts the newest ones; the newest one
  // waits; the oldest one alone cannot run out unless the cache is smaller
  // than its context (then it ends with "length").
  std::vector<Running*> plan;
  int reserved = 0;
  for (size_t i = 0; i < running_.size();) {
    Running& r = *running_[i];
    r.step_tokens = 0;
    int n;
    const int free_pages = kv.free_pages() - reserved;
    if (!r.prefilling()) {
      n = r.spec ? r.spec->MaxTreeSize(r.n_kv) : 1;
      if (pages(r.n_kv + n) - pages(r.n_kv) > free_pages) n = 0;
    } else {
      n = std::min({options_.prefill_chunk, r.prefill_end - r.n_kv, prefill_budget});
      const int room = pages(r.n_kv) * ps - r.n_kv + free_pages * ps;
      if (prefill_budget > 0) n = std::min(n, room);
      else n = -1;  // no budget left: wait, not blocked
    }
    if (n > 0) {
      r.step_tokens = n;
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

  // Build the batch.
  std::vector<SeqInput> batch;
  batch.reserve(plan.size());
  int offset = 0;
  for (Running* r : plan) {
    SeqInput in;
    in.seq = r->kv_seq;
    if (r->step_prefill) {
      in.tokens.assign(r->history.begin() + r->n_kv, r->history.begin() + r->n_kv + r->step_tokens);
    } else if (r->spec) {
      Status s = r->spec->Draft(r->history, r->n_kv, r->kv_seq, &in);
      if (!s.ok()) {
        LogStatus(s);
        Finish(*r, "error", s);
        continue;
      }
      r->step_tokens = static_cast<int>(in.tokens.size());
    } else {
      in.tokens = {r->history.back()};
    }
    r->batch_index = static_cast<int>(batch.size());
    r->token_offset = offset;
    offset += r->step_tokens;
    batch.push_back(std::move(in));
  }
  std::erase_if(plan, [](Running* r) { return r->done; });
  out_.seq_row.clear();
  if (batch.empty()) {
    std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->done; });
    return Status::Ok();
  }

  const bool eagle = options_.spec.algorithm == SpecAlgorithm::kEagle3;
  RETURN_IF_ERROR(engine_->Forward(batch, eagle, &out_).WithStage("engine step"));
  metrics_.steps++;
  const double now = NowSeconds();
  const int V = engine_->config().vocab_size;
  const size_t aux_stride = 3 * static_cast<size_t>(engine_->config().hidden_dim);

  for (Running* rp : plan) {
    Running& r = *rp;
    const int row0 = out_.seq_row[r.batch_index];
    const float* aux =
        eagle ? out_.aux_hidden.data() + static_cast<size_t>(r.token_offset) * aux_stride : nullptr;
    Status s;
    if (r.step_prefill) {
      const int a = r.n_kv;
      r.n_kv += r.step_tokens;
      const bool sample = r.n_kv == r.prefill_end && r.sample_after_prefill;
      if (sample) {
        const int32_t t = r.sampler.Sample(&out_.logits[static_cast<size_t>(row0) * V], V,
                                           r.req.sampling);
        EmitTokens(r, {t}, out_.logits.data(), {row0}, now);
      }
      if (r.spec && !r.done) {
        // Row k of the chunk predicts history[a + k + 1].
        std::vector<int32_t> next(r.history.begin() + a + 1, r.history.begin() + r.n_kv + 1);
        s = r.spec->ExtendPrefill(aux, next, a);
      }
    } else if (r.spec) {
      const int L = r.n_kv;
      VerifyResult vr = r.spec->Commit(*engine_, r.kv_seq, L,
                                       &out_.logits[static_cast<size_t>(row0) * V],
                                       r.req.sampling, &r.sampler);
      r.n_kv = L + static_cast<int>(vr.path.size());
      metrics_.accept_length.Observe(static_cast<double>(vr.emitted.size()));
      std::vector<int> rows;
      for (int p : vr.path) rows.push_back(row0 + p);
      EmitTokens(r, vr.emitted, out_.logits.data(), rows, now);
      if (!r.done) s = r.spec->ExtendAccepted(vr, aux, L);
    } else {
      r.n_kv += 1;
      const int32_t t =
          r.sampler.Sample(&out_.logits[static_cast<size_t>(row0) * V], V, r.req.sampling);
      EmitTokens(r, {t}, out_.logits.data(), {row0}, now);
    }
    if (!s.ok()) {
      LogStatus(s);
      Finish(r, "error", s);
    }
  }
  std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->done; });
  return Status::Ok();
}

void Scheduler::FailAll(const Status& s) {
  LogStatus(s);
  for (auto& r : running_) Finish(*r, "error", s);
  running_.clear();
  std::lock_guard<std::mutex> lock(mu_);
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
