// Continuous batching over a small random-weight model: batched output equals
// each request run alone (and the single-sequence generation loops), KV pages
// return to zero after cancellation and preemption, a full queue refuses.
#include "base/test_reference.h"
#include "runtime/scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "kernels/dispatch.h"
#include "kernels/kernel_paths_test_util.h"
#include "runtime/generate.h"
#include "runtime/reference_decode.h"
#include "runtime/tiny_model_test_util.h"
#include "spec/ngram.h"

namespace specd {
namespace {

using testing_util::TinyModelPath;

struct Rig {
  std::unique_ptr<Communicator> comm = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Engine> engine;

  explicit Rig(int kv_cache_tokens = 0) {
    RunnerOptions ro;
    ro.model_path = TinyModelPath();
    ro.threads = 2;
    ro.kv_cache_tokens = kv_cache_tokens;
    ro.amx = kernels::AmxActive();  // the kernel path a test selected
    auto r = ModelRunner::Create(ro, comm.get());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    runner = std::move(r).value();
    engine = std::make_unique<Engine>(runner.get());
  }
};

struct Result {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  int completion_tokens = 0;
  SequenceStats stats;
};

Result Drain(RequestStream& s) {
  Result r;
  OutputDelta d;
  while (true) {
    if (!s.Next(&d, 30.0)) {
      ADD_FAILURE() << "no output for 30 s";
      return r;
    }
    r.tokens.insert(r.tokens.end(), d.token_ids.begin(), d.token_ids.end());
    r.logprobs.insert(r.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finished) {
      r.finish_reason = d.finish_reason;
      r.completion_tokens = d.completion_tokens;
      r.stats = d.stats;
      return r;
    }
  }
}

// Prompts with repeated spans, so n-gram drafting finds matches.
std::vector<ServeRequest> MakeRequests(int n, int max_tokens, float temperature) {
  std::mt19937 rng(1234);
  std::vector<ServeRequest> reqs;
  for (int i = 0; i < n; ++i) {
    ServeRequest r;
    const int len = 3 + static_cast<int>(rng() % 40);
    std::vector<int32_t> motif;
    for (int k = 0; k < 5; ++k) motif.push_back(static_cast<int32_t>(rng() % 256));
    for (int k = 0; k < len; ++k)
      r.prompt.push_back(k % 3 == 0 ? static_cast<int32_t>(rng() % 256) : motif[k % 5]);
    r.max_tokens = max_tokens + i % 5;
    r.sampling.temperature = temperature;
    r.sampling.seed = 100 + i;
    reqs.push_back(r);
  }
  return reqs;
}

std::vector<Result> RunAll(Scheduler& s, const std::vector<ServeRequest>& reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const ServeRequest& r : reqs) {
    auto st = s.Submit(r);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    streams.push_back(st.ok() ? *st : nullptr);
  }
  std::vector<Result> out;
  for (auto& st : streams) out.push_back(st ? Drain(*st) : Result());
  return out;
}

struct BatchCase {
  const char* name;
  SpecAlgorithm algorithm;
  float temperature;
};

class SchedulerBatchTest : public ::testing::TestWithParam<BatchCase> {};

// 16 concurrent requests produce exactly the tokens each produces alone, and
// equal plain decoding written without the scheduler (ReferenceDecode) with
// the same sampling: greedy or seeded, speculative or not; on every kernel
// path of this CPU.
void CheckSixteenConcurrentEqualEachAlone(const BatchCase& c) {
  Rig rig;
  SchedulerOptions o;
  o.max_batch = 16;
  o.prefill_chunk = 8;  // chunked prefill alongside decoding
  o.spec.algorithm = c.algorithm;
  o.spec.tree.num_draft_tokens = 6;
  const std::vector<ServeRequest> reqs = MakeRequests(16, 20, c.temperature);

  std::vector<Result> alone;
  {
    Scheduler s(rig.engine.get(), nullptr, nullptr, o);
    ASSERT_TRUE(s.Start().ok());
    for (const ServeRequest& r : reqs) alone.push_back(RunAll(s, {r})[0]);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(alone[i].tokens, ReferenceDecode(*rig.engine, reqs[i].prompt, reqs[i].max_tokens,
                                               reqs[i].sampling))
        << "request " << i;
  }
  Scheduler s(rig.engine.get(), nullptr, nullptr, o);
  ASSERT_TRUE(s.Start().ok());
  std::vector<Result> batched = RunAll(s, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(batched[i].finish_reason, "length");
    EXPECT_EQ(static_cast<int>(batched[i].tokens.size()), reqs[i].max_tokens);
    EXPECT_EQ(batched[i].completion_tokens, reqs[i].max_tokens);
  }
  s.Stop(5);
  EXPECT_EQ(s.metrics().kv_used_pages.load(), 0);
  EXPECT_EQ(s.metrics().running.load(), 0);
  if (c.algorithm != SpecAlgorithm::kNone) {
    EXPECT_GT(s.metrics().accept_length.Get().count, 0u);
  }
}

TEST_P(SchedulerBatchTest, SixteenConcurrentEqualEachAlone) {
  for (const kernels::KernelPathCase& path : kernels::KernelPathCasesOfThisCpu()) {
    const kernels::ScopedKernelPaths paths(path.paths);
    SCOPED_TRACE("path " + path.name);
    CheckSixteenConcurrentEqualEachAlone(GetParam());
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, SchedulerBatchTest,
    ::testing::Values(BatchCase{"GreedyPlain", SpecAlgorithm::kNone, 0.f},
                      BatchCase{"GreedyNgram", SpecAlgorithm::kNgram, 0.f},
                      BatchCase{"SampledPlain", SpecAlgorithm::kNone, 0.8f},
                      BatchCase{"SampledNgram", SpecAlgorithm::kNgram, 0.8f}),
    [](const ::testing::TestParamInfo<BatchCase>& i) { return std::string(i.param.name); });

// EAGLE-3 over the demo model and its trained draft head: 16 concurrent
// requests equal each one alone and plain decoding with the same sampling,
// greedy and seeded at temperature 1.
class SchedulerEagle3Test : public ::testing::TestWithParam<float> {};

// --deterministic for the run: the demo model is BF16, whose multi-token
// matmuls use AMX-BF16 tiles (another summation order) where present unless
// batch invariance is on.
struct ScopedBatchInvariant {
  ScopedBatchInvariant() : was(kernels::BatchInvariantEnabled()) { kernels::SetBatchInvariant(true); }
  ~ScopedBatchInvariant() { kernels::SetBatchInvariant(was); }
  bool was;
};

// The demo model and its trained EAGLE-3 head (two threads, capture layers
// set); `missing` says why not when the files are absent.
struct DemoEagleRig {
  std::unique_ptr<Communicator> comm = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Eagle3Head> head;
  std::unique_ptr<Engine> engine;
  std::string missing;

  DemoEagleRig() {
    const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
    if (!std::filesystem::exists(demo + "/eagle3/model.safetensors") ||
        !std::filesystem::exists(demo + "/model.safetensors")) {
      missing = "models/demo with its eagle3 head is not present";
      return;
    }
    RunnerOptions ro;
    ro.model_path = demo;
    ro.threads = 2;
    ro.amx = kernels::AmxActive();  // the kernel path a test selected
    auto r = ModelRunner::Create(ro, comm.get());
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      return;
    }
    runner = std::move(r).value();
    auto h = Eagle3Head::Create(demo + "/eagle3", runner->model(), ro.load, runner->pool());
    if (!h.ok()) {
      ADD_FAILURE() << h.status().ToString();
      return;
    }
    head = std::move(h).value();
    runner->SetCaptureLayers(head->aux_layers());
    engine = std::make_unique<Engine>(runner.get());
  }
};

void CheckEagle3BatchedEqualsAloneAndPlain(float temperature);

TEST_P(SchedulerEagle3Test, BatchedEqualsAloneAndPlain) {
  const ScopedBatchInvariant invariant;
  for (const kernels::KernelPathCase& path : kernels::KernelPathCasesOfThisCpu()) {
    const kernels::ScopedKernelPaths paths(path.paths);
    SCOPED_TRACE("path " + path.name);
    CheckEagle3BatchedEqualsAloneAndPlain(GetParam());
    if (HasFatalFailure() || IsSkipped()) return;
  }
}

void CheckEagle3BatchedEqualsAloneAndPlain(float temperature) {
  DemoEagleRig rig;
  if (!rig.missing.empty()) SPECD_REFERENCE_MISSING(rig.missing);
  ASSERT_NE(rig.engine, nullptr);
  Engine& engine = *rig.engine;
  SchedulerOptions o;
  o.prefill_chunk = 8;
  o.spec.algorithm = SpecAlgorithm::kEagle3;
  o.spec.tree.num_steps = 3;
  o.spec.tree.topk = 2;
  o.spec.tree.num_draft_tokens = 6;
  const std::vector<ServeRequest> reqs = MakeRequests(16, 20, temperature);
  std::vector<Result> alone;
  {
    Scheduler s(&engine, nullptr, rig.head.get(), o);
    ASSERT_TRUE(s.Start().ok());
    for (const ServeRequest& r : reqs) alone.push_back(RunAll(s, {r})[0]);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(alone[i].tokens,
              ReferenceDecode(engine, reqs[i].prompt, reqs[i].max_tokens, reqs[i].sampling))
        << "request " << i;
  }
  Scheduler s(&engine, nullptr, rig.head.get(), o);
  ASSERT_TRUE(s.Start().ok());
  std::vector<Result> batched = RunAll(s, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(static_cast<int>(batched[i].tokens.size()), reqs[i].max_tokens);
  }
  const Histogram::Snapshot acc = s.metrics().accept_length.Get();
  EXPECT_GT(acc.count, 0u);
  std::printf("EAGLE-3 mean acceptance length %.2f over %llu verify steps\n",
              acc.sum / static_cast<double>(acc.count), static_cast<unsigned long long>(acc.count));
  s.Stop(5);
  EXPECT_EQ(s.metrics().kv_used_pages.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Sampling, SchedulerEagle3Test, ::testing::Values(0.f, 1.f),
                         [](const ::testing::TestParamInfo<float>& i) {
                           return std::string(i.param == 0.f ? "Greedy" : "SeededTemperature1");
                         });

// Auto shapes where drafting never pays (verifying n tokens costs n decode
// steps): sequences take plain steps, one token each, and queue their
// EAGLE-3 aux rows, and now and then probe with a draft from those rows. In
// a batch each sequence must find its own rows, at its own token offset, so
// every request drafts and accepts exactly what it does alone (batch-
// invariant kernels: the same hidden states alone and batched).
TEST(SchedulerAutoShapeTest, PlainStepsInABatchFeedTheHeadTheirOwnRows) {
  const ScopedBatchInvariant invariant;
  DemoEagleRig rig;
  if (!rig.missing.empty()) SPECD_REFERENCE_MISSING(rig.missing);
  ASSERT_NE(rig.engine, nullptr);
  Engine& engine = *rig.engine;
  // Verifying n tokens costs n decode steps: drafting never pays, and a
  // probe (a depth-2 draft) waits until its expected loss is 1 % of the plain
  // steps since the last one, about 126 steps.
  StepCosts linear;
  linear.learn = false;
  for (int n = 1; n <= 64; ++n) linear.target.push_back(1e-3 * n);
  linear.draft_first = linear.draft_step = 1e-5;
  engine.set_step_costs(linear);
  SchedulerOptions o;
  o.prefill_chunk = 8;
  o.spec.algorithm = SpecAlgorithm::kEagle3;
  o.spec.auto_shape = true;
  std::vector<ServeRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    ServeRequest r;
    for (int k = 0; k < 5 + 3 * i; ++k) r.prompt.push_back(static_cast<int32_t>(40 + 97 * (i + k) % 1900));
    r.max_tokens = 200;  // within the demo's 256-token context
    reqs.push_back(r);
  }
  std::vector<Result> alone;
  for (const ServeRequest& r : reqs) {
    Scheduler s(&engine, nullptr, rig.head.get(), o);  // no acceptance pooled from the others
    ASSERT_TRUE(s.Start().ok());
    alone.push_back(RunAll(s, {r})[0]);
  }
  Scheduler s(&engine, nullptr, rig.head.get(), o);
  ASSERT_TRUE(s.Start().ok());
  const std::vector<Result> batched = RunAll(s, reqs);
  int probes = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(batched[i].finish_reason, "length") << "request " << i;
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(batched[i].stats.depth_hist, alone[i].stats.depth_hist) << "request " << i;
    EXPECT_EQ(batched[i].stats.accept_hist, alone[i].stats.accept_hist) << "request " << i;
    for (size_t d = 1; d < alone[i].stats.depth_hist.size(); ++d) probes += alone[i].stats.depth_hist[d];
  }
  EXPECT_EQ(probes, 4) << "each request should probe once";
}

// A KV cache far smaller than the demand: sequences are preempted and
// re-prefilled, and every request still gets exactly its tokens.
TEST(SchedulerTest, KvExhaustionPreemptsWithoutChangingOutput) {
  const std::vector<ServeRequest> reqs = MakeRequests(8, 40, 0.f);
  std::vector<Result> alone;
  {
    Rig big;
    SchedulerOptions o;
    Scheduler s(big.engine.get(), nullptr, nullptr, o);
    ASSERT_TRUE(s.Start().ok());
    for (const ServeRequest& r : reqs) alone.push_back(RunAll(s, {r})[0]);
  }
  Rig small(/*kv_cache_tokens=*/160);  // 10 pages of 16 for ~8 x 70 tokens
  SchedulerOptions o;
  o.max_batch = 8;
  Scheduler s(small.engine.get(), nullptr, nullptr, o);
  ASSERT_TRUE(s.Start().ok());
  std::vector<Result> got = RunAll(s, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].finish_reason, "length");
  }
  EXPECT_GT(s.metrics().preemptions.load(), 0);
  s.Stop(5);
  EXPECT_EQ(s.metrics().kv_used_pages.load(), 0);
}

// The same exhaustion with speculation: a sequence whose draft tree does not
// fit the free pages takes a plain step instead of preempting a newer one,
// so speculating preempts no more than plain decoding does, and every
// request still gets the plain greedy tokens.
TEST(SchedulerTest, DraftsNeverPreemptForRoom) {
  const std::vector<ServeRequest> reqs = MakeRequests(8, 40, 0.f);
  std::vector<Result> alone;
  {
    Rig big;
    Scheduler s(big.engine.get(), nullptr, nullptr, SchedulerOptions{});
    ASSERT_TRUE(s.Start().ok());
    for (const ServeRequest& r : reqs) alone.push_back(RunAll(s, {r})[0]);
  }
  auto run = [&](SpecAlgorithm algorithm, int64_t* preemptions) {
    Rig small(/*kv_cache_tokens=*/160);
    SchedulerOptions o;
    o.max_batch = 8;
    o.spec.algorithm = algorithm;
    o.spec.auto_shape = true;
    // Drafts always pay by these costs, so every sequence asks for its tree.
    StepCosts flat;
    flat.learn = false;
    flat.target.assign(64, 1e-3);
    small.engine->set_step_costs(flat);
    Scheduler s(small.engine.get(), nullptr, nullptr, o);
    EXPECT_TRUE(s.Start().ok());
    std::vector<Result> got = RunAll(s, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ(got[i].finish_reason, "length");
    }
    *preemptions = s.metrics().preemptions.load();
    s.Stop(5);
    EXPECT_EQ(s.metrics().kv_used_pages.load(), 0);
  };
  int64_t plain = 0, ngram = 0;
  run(SpecAlgorithm::kNone, &plain);
  run(SpecAlgorithm::kNgram, &ngram);
  EXPECT_GT(plain, 0);
  EXPECT_LE(ngram, plain);
}

TEST(SchedulerTest, CancellationFreesKvPages) {
  Rig rig;
  SchedulerOptions o;
  Scheduler s(rig.engine.get(), nullptr, nullptr, o);
  ASSERT_TRUE(s.Start().ok());
  std::vector<ServeRequest> reqs = MakeRequests(4, 1000, 0.f);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& r : reqs) streams.push_back(*s.Submit(r));
  // Wait for every request to be decoding (its first token out).
  for (auto& st : streams) {
    OutputDelta d;
    ASSERT_TRUE(st->Next(&d, 30.0));
    EXPECT_FALSE(d.token_ids.empty());
  }
  // The gauge is published at a step boundary, which may come just after the
  // first tokens reach the streams; 1000-token requests keep running past it.
  for (int i = 0; i < 1000 && s.metrics().kv_used_pages.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GT(s.metrics().kv_used_pages.load(), 0);
  for (auto& st : streams) st->Cancel();
  for (auto& st : streams) EXPECT_EQ(Drain(*st).finish_reason, "cancelled");
  // Gauges are published at the step boundary after the frees.
  for (int i = 0; i < 1000 && (s.metrics().running.load() != 0 ||
                               s.metrics().kv_used_pages.load() != 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.metrics().running.load(), 0);
  EXPECT_EQ(s.metrics().kv_used_pages.load(), 0);
  EXPECT_EQ(rig.engine->kv().used_pages(), 0);
  EXPECT_EQ(s.metrics().finished_cancelled.load(), 4);
}

TEST(SchedulerTest, FullQueueRefusesWithResourceExhausted) {
  Rig rig;
  SchedulerOptions o;
  o.max_queue = 2;
  // Not started: nothing leaves the queue.
  Scheduler s(rig.engine.get(), nullptr, nullptr, o);
  ServeRequest r = MakeRequests(1, 4, 0.f)[0];
  ASSERT_TRUE(s.Submit(r).ok());
  ASSERT_TRUE(s.Submit(r).ok());
  auto third = s.Submit(r);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.metrics().queue_depth.load(), 2);
}

TEST(SchedulerTest, RejectsRequestsTheModelCannotRun) {
  Rig rig;
  Scheduler s(rig.engine.get(), nullptr, nullptr, SchedulerOptions());
  ServeRequest r = MakeRequests(1, 4, 0.f)[0];
  ServeRequest bad = r;
  bad.prompt.clear();
  EXPECT_EQ(s.Submit(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.prompt.push_back(256);  // vocab is 256
  EXPECT_EQ(s.Submit(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.prompt.assign(s.context_length(), 1);
  auto st = s.Submit(bad);
  EXPECT_EQ(st.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.status().message().find(std::to_string(s.context_length())), std::string::npos);
  bad = r;
  bad.max_tokens = 0;
  EXPECT_EQ(s.Submit(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.sampling.temperature = -1;
  EXPECT_EQ(s.Submit(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.stop_strings = {"x"};  // no tokenizer
  EXPECT_EQ(s.Submit(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(SchedulerTest, StopIdsEndGenerationAndLogprobsAreConsistent) {
  Rig rig;
  Scheduler s(rig.engine.get(), nullptr, nullptr, SchedulerOptions());
  ASSERT_TRUE(s.Start().ok());
  ServeRequest r = MakeRequests(1, 12, 0.f)[0];
  r.logprobs = 3;
  Result full = RunAll(s, {r})[0];
  ASSERT_EQ(full.tokens.size(), 12u);
  ASSERT_EQ(full.logprobs.size(), 12u);
  for (size_t i = 0; i < full.tokens.size(); ++i) {
    const TokenLogprob& lp = full.logprobs[i];
    EXPECT_EQ(lp.id, full.tokens[i]);
    ASSERT_EQ(lp.top.size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(lp.top[0].id, lp.id);
    EXPECT_FLOAT_EQ(lp.top[0].logprob, lp.logprob);
    EXPECT_LE(lp.logprob, 0.f);
    EXPECT_GE(lp.top[0].logprob, lp.top[1].logprob);
    EXPECT_GE(lp.top[1].logprob, lp.top[2].logprob);
  }
  // Stop at the 5th token's id: output ends there, "stop".
  r.stop_ids = {full.tokens[4]};
  size_t first = 0;
  while (full.tokens[first] != full.tokens[4]) ++first;
  Result stopped = RunAll(s, {r})[0];
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.tokens,
            std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + first + 1));
}

// Auto-shaped speculation: whatever depths the cost model picks, greedy
// output equals plain decoding; the depths follow the step costs it is given.
struct AutoRun {
  std::vector<int32_t> tokens;
  GenerateStats stats;
};

AutoRun RunAuto(Engine& engine, const std::vector<int32_t>& prompt, int max_tokens,
                const StepCosts* costs, const SamplingParams& sampling = {},
                AcceptanceModel* pooled = nullptr) {
  if (costs != nullptr) engine.set_step_costs(*costs);
  SpecOptions so;
  so.algorithm = SpecAlgorithm::kNgram;
  so.auto_shape = true;
  so.max_auto_depth = 6;
  GenerateRequest g;
  g.prompt = prompt;
  g.max_tokens = max_tokens;
  g.sampling = sampling;
  GenerateResult res;
  Status s = Generate(engine, g, [](int32_t) { return true; }, &res, so, nullptr, pooled);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return {res.tokens, res.stats};
}

int Steps(const std::vector<int>& hist, int from) {
  int n = 0;
  for (size_t d = from; d < hist.size(); ++d) n += hist[d];
  return n;
}

TEST(SchedulerAutoShapeTest, GreedyEqualsPlainWhateverTheCosts) {
  Rig rig;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3};
  const std::vector<int32_t> want = ReferenceDecode(*rig.engine, prompt, 60);
  // Measured on this machine (the engine has none yet, so Generate measures).
  EXPECT_EQ(RunAuto(*rig.engine, prompt, 60, nullptr).tokens, want);
  ASSERT_NE(rig.engine->step_costs(), nullptr);
  EXPECT_EQ(rig.engine->step_costs()->target.size(), 7u);  // depths 0..6

  // Verifying n tokens costs n decode steps: drafting can never pay, so every
  // step is plain except the probes (after 16, 32, 64 plain steps).
  StepCosts linear;
  linear.learn = false;
  for (int n = 1; n <= 16; ++n) linear.target.push_back(1e-3 * n);
  AutoRun plain = RunAuto(*rig.engine, prompt, 60, &linear);
  EXPECT_EQ(plain.tokens, want);
  EXPECT_GT(Steps(plain.stats.depth_hist, 0), 0);
  EXPECT_LE(Steps(plain.stats.depth_hist, 1), 3) << "drafted although verify is never cheaper";
  EXPECT_DOUBLE_EQ(plain.stats.predicted_speedup_mean(), 1.0);

  // Verification as cheap as a decode step: whenever the n-gram drafter finds
  // a match it drafts, and the output is still plain greedy's.
  StepCosts flat;
  flat.learn = false;
  flat.target.assign(16, 1e-3);
  AutoRun deep = RunAuto(*rig.engine, prompt, 60, &flat);
  EXPECT_EQ(deep.tokens, want);
  EXPECT_GT(Steps(deep.stats.depth_hist, 1), 0);
  EXPECT_GT(deep.stats.predicted_speedup_mean(), 1.0);
  EXPECT_EQ(rig.engine->kv().used_pages(), 0);
}

// N-gram drafts are known before the choice: a sequence chooses among the
// drafts its history offers, so a step with no match is not counted, nor
// verified, as a deep draft. With verification as cheap as a decode step
// every step drafts all it can: max_tokens 2 leaves one decode step, whose
// depth is the length of the n-gram draft after the first token. The prompts
// are a base prompt plus the start of its greedy continuation, so some
// histories offer no draft and others the deepest chain.
TEST(SchedulerAutoShapeTest, NgramDepthIsTheDraftTheHistoryOffers) {
  Rig rig;
  StepCosts flat;
  flat.learn = false;
  flat.target.assign(16, 1e-3);
  std::set<int> offered;
  for (const std::vector<int32_t>& base :
       {std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3},
        std::vector<int32_t>{20, 21, 22, 23, 24, 25}}) {
    const std::vector<int32_t> cont = ReferenceDecode(*rig.engine, base, 24);
    for (size_t k = 0; k < cont.size(); ++k) {
      std::vector<int32_t> prompt = base;
      prompt.insert(prompt.end(), cont.begin(), cont.begin() + k);
      std::vector<int32_t> history = prompt;
      history.push_back(ReferenceDecode(*rig.engine, prompt, 1)[0]);
      const int want = std::min(6, NgramDraft(history, 6).size() - 1);
      offered.insert(want);
      AutoRun run = RunAuto(*rig.engine, prompt, 2, &flat);
      std::vector<int> hist(want + 1, 0);
      hist[want] = 1;
      EXPECT_EQ(run.stats.depth_hist, hist) << "prompt of " << prompt.size() << " tokens";
    }
  }
  EXPECT_TRUE(offered.count(0) && offered.count(6))
      << "the prompts should offer no draft and the deepest chain";
}

// Seeded sampling under auto shapes: whatever depths the costs lead to, each
// token is the one plain sampling draws at its position, so the text equals
// plain decoding's with the same seed.
TEST(SchedulerAutoShapeTest, SeededSamplingEqualsPlainWhateverTheCosts) {
  Rig rig;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3};
  StepCosts flat;
  flat.learn = false;
  flat.target.assign(16, 1e-3);
  StepCosts linear;
  linear.learn = false;
  for (int n = 1; n <= 16; ++n) linear.target.push_back(1e-3 * n);
  for (float temperature : {0.5f, 1.f}) {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 77;
    const std::vector<int32_t> want = ReferenceDecode(*rig.engine, prompt, 60, sp);
    std::vector<int> drafted;
    for (const StepCosts* costs : {&flat, &linear}) {
      AutoRun run = RunAuto(*rig.engine, prompt, 60, costs, sp);
      EXPECT_EQ(run.tokens, want) << "temperature " << temperature;
      drafted.push_back(Steps(run.stats.depth_hist, 1));
    }
    EXPECT_GT(drafted[0], drafted[1]) << "cheap verification should draft more often";
  }
}

// Drafting far from paying (a draft step as dear as a decode step): a probe
// would lose more than kProbeBudget of the plain steps before it, so a
// 60-token request never probes; the output is plain greedy's.
TEST(SchedulerAutoShapeTest, NoProbesWhereDraftingIsFarFromPaying) {
  Rig rig;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3};
  StepCosts dear;
  dear.learn = false;
  for (int n = 1; n <= 16; ++n) dear.target.push_back(1e-3 * n);
  dear.draft_step = 1e-3;
  AutoRun run = RunAuto(*rig.engine, prompt, 60, &dear);
  EXPECT_EQ(run.tokens, ReferenceDecode(*rig.engine, prompt, 60));
  EXPECT_EQ(Steps(run.stats.depth_hist, 1), 0) << "probed although a probe cannot pay";
}

// The pooled acceptance a run ends with is where the next one starts
// (runtime/acceptance_cache.h keeps it between processes): every verified
// draft is counted into it, and a remembered "never accepted" keeps a new
// run from drafting where the blind prior (p = 0.5) would, while the output
// stays plain greedy's.
TEST(SchedulerAutoShapeTest, StartsFromTheRememberedAcceptance) {
  Rig rig;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3};
  const std::vector<int32_t> want = ReferenceDecode(*rig.engine, prompt, 40);
  // A draft of k tokens costs 0.3 k decode steps more: the blind prior's
  // E(1) = 1.5 pays (1.5 / 1.3), E(1) near 1 does not.
  StepCosts costs;
  costs.learn = false;
  for (int n = 1; n <= 16; ++n) costs.target.push_back(1e-3 * (1 + 0.3 * (n - 1)));

  AcceptanceModel blind(6);
  AutoRun a = RunAuto(*rig.engine, prompt, 40, &costs, {}, &blind);
  EXPECT_EQ(a.tokens, want);
  const int drafted_blind = Steps(a.stats.depth_hist, 1);
  ASSERT_GT(drafted_blind, 0);
  EXPECT_EQ(blind.observations(), drafted_blind) << "each verified draft is pooled";

  // The next run continues the same counts.
  AcceptanceModel carried = blind;
  AutoRun b = RunAuto(*rig.engine, prompt, 40, &costs, {}, &carried);
  EXPECT_EQ(b.tokens, want);
  EXPECT_EQ(carried.observations(), drafted_blind + Steps(b.stats.depth_hist, 1));

  AcceptanceModel never(6);
  for (int i = 0; i < 40; ++i) never.Observe(6, 0);
  AutoRun c = RunAuto(*rig.engine, prompt, 40, &costs, {}, &never);
  EXPECT_EQ(c.tokens, want);
  EXPECT_LT(Steps(c.stats.depth_hist, 1), drafted_blind)
      << "a remembered never-accepted drafter should draft less than a blind start";
}

TEST(SchedulerAutoShapeTest, BatchedAutoEqualsEachAlone) {
  Rig rig;
  StepCosts flat;
  flat.learn = false;
  flat.target.assign(64, 1e-3);
  rig.engine->set_step_costs(flat);
  SchedulerOptions o;
  o.max_batch = 8;
  o.prefill_chunk = 8;
  o.spec.algorithm = SpecAlgorithm::kNgram;
  o.spec.auto_shape = true;
  const std::vector<ServeRequest> reqs = MakeRequests(8, 24, 0.f);
  Scheduler s(rig.engine.get(), nullptr, nullptr, o);
  ASSERT_TRUE(s.Start().ok());
  std::vector<Result> batched = RunAll(s, reqs);
  s.Stop(5);  // the engine is free again
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(batched[i].tokens, ReferenceDecode(*rig.engine, reqs[i].prompt, reqs[i].max_tokens))
        << "request " << i;
  EXPECT_GT(s.metrics().draft_depth.Get().count, 0u);
}

// The benchmark oracle drafts the target's own greedy continuation: with
// every token kept each step commits depth + 1 tokens, with none one, and in
// between the mean follows 1 + p + ... + p^depth; the output is always
// plain greedy's.
TEST(SchedulerOracleTest, AcceptanceFollowsTheCorruptionRate) {
  Rig rig;
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  const int n = 200;
  const std::vector<int32_t> want = ReferenceDecode(*rig.engine, prompt, n);
  for (double p : {1.0, 0.0, 0.6}) {
    SpecOptions so;
    so.algorithm = SpecAlgorithm::kOracle;
    so.tree.num_steps = 3;
    so.tree.topk = 1;
    so.tree.num_draft_tokens = 4;
    so.oracle_sequence = prompt;
    so.oracle_sequence.insert(so.oracle_sequence.end(), want.begin(), want.end());
    so.oracle_accept = p;
    GenerateRequest g;
    g.prompt = prompt;
    g.max_tokens = n;
    GenerateResult res;
    ASSERT_TRUE(Generate(*rig.engine, g, [](int32_t) { return true; }, &res, so).ok());
    EXPECT_EQ(res.tokens, want) << "p " << p;
    const double tau = res.stats.accept_length_mean();
    const double expect = 1 + p + p * p + p * p * p;
    if (p == 1.0) EXPECT_GT(tau, 3.9);  // the last step may be cut by max_tokens
    else if (p == 0.0) EXPECT_DOUBLE_EQ(tau, 1.0);
    else EXPECT_NEAR(tau, expect, 0.35) << "p " << p;
  }
  EXPECT_NEAR(OracleAcceptFor(1 + 0.6 + 0.36 + 0.216, 3), 0.6, 1e-9);
}

// Issue 22: a request is refused up front, naming the numbers, when its
// prompt + max_tokens cannot fit the KV cache; one that fits exactly gets all
// its tokens even while speculating, whose draft tree no longer fits near the
// end (those steps run plain), and they are plain greedy's.
TEST(SchedulerKvBudgetTest, RefusesWhatCannotFitAndCompletesWhatFitsExactly) {
  Rig rig(/*kv_cache_tokens=*/48);  // 3 pages of 16
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  {
    Scheduler s(rig.engine.get(), nullptr, nullptr, SchedulerOptions());
    EXPECT_EQ(s.kv_capacity_tokens(), 48);
    ServeRequest r;
    r.prompt = prompt;
    r.max_tokens = 39;
    auto st = s.Submit(r);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.status().code(), StatusCode::kOutOfRange);
    EXPECT_NE(st.status().message().find("10 prompt tokens + max_tokens 39 = 49 tokens do not fit "
                                         "the KV cache of 48 tokens"),
              std::string::npos)
        << st.status().message();
    EXPECT_NE(st.status().message().find("at most 38"), std::string::npos);
  }
  const int n = 38;
  const std::vector<int32_t> want = ReferenceDecode(*rig.engine, prompt, n);
  SpecOptions so;
  so.algorithm = SpecAlgorithm::kOracle;
  so.tree.num_steps = 4;
  so.tree.topk = 1;
  so.tree.num_draft_tokens = 5;
  so.oracle_sequence = prompt;
  so.oracle_sequence.insert(so.oracle_sequence.end(), want.begin(), want.end());
  so.oracle_accept = 1;
  GenerateRequest g;
  g.prompt = prompt;
  g.max_tokens = n;
  GenerateResult res;
  Status st = Generate(*rig.engine, g, [](int32_t) { return true; }, &res, so);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(res.tokens, want);
  EXPECT_EQ(res.finish_reason, "length");
  // Some steps could not verify a whole tree: fewer than 5 tokens each.
  ASSERT_FALSE(res.stats.accept_hist.empty());
  EXPECT_GT(res.stats.accept_hist[0], 0);
  EXPECT_EQ(rig.engine->kv().used_pages(), 0);
}

}  // namespace
}  // namespace specd
