// A request whose logits are not finite ends with an error that names it and
// the position, instead of emitting token 0 forever; the other requests of
// the same batch are unaffected. The model: the tiny fixture with a NaN
// planted in one token's embedding row (loaded with --check-tensors off), so
// exactly the requests that meet that token go wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "loader/test_util.h"
#include "modelgen/plant_value.h"
#include "runtime/reference_decode.h"
#include "runtime/scheduler.h"
#include "runtime/tiny_model_test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;

struct Rig {
  std::unique_ptr<Communicator> comm = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Engine> engine;

  explicit Rig(const std::string& path) {
    RunnerOptions ro;
    ro.model_path = path;
    ro.threads = 2;
    ro.load.check_tensors = CheckTensors::kOff;
    auto r = ModelRunner::Create(ro, comm.get());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    runner = std::move(r).value();
    engine = std::make_unique<Engine>(runner.get());
  }
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::string finish_reason;
  Status error;
};

Outcome Drain(RequestStream& s) {
  Outcome o;
  OutputDelta d;
  while (s.Next(&d, 30.0)) {
    o.tokens.insert(o.tokens.end(), d.token_ids.begin(), d.token_ids.end());
    if (d.finished) {
      o.finish_reason = d.finish_reason;
      o.error = d.error;
      return o;
    }
  }
  ADD_FAILURE() << "no output for 30 s";
  return o;
}

class SchedulerNanTest : public ::testing::Test {
 protected:
  static constexpr int kMaxTokens = 12;
  void SetUp() override {
    clean_ = std::make_unique<Rig>(testing_util::TinyModelPath());
    // Request A's greedy continuation; its first new token that is in
    // neither the prompt nor B's continuation becomes the poisoned one.
    a_.prompt = {1, 2, 3, 4, 5};
    a_.max_tokens = kMaxTokens;
    b_.prompt = {9, 40, 77, 120};
    b_.max_tokens = kMaxTokens;
    a_ref_ = ReferenceDecode(*clean_->engine, a_.prompt, kMaxTokens);
    b_ref_ = ReferenceDecode(*clean_->engine, b_.prompt, kMaxTokens);
    ASSERT_EQ(a_ref_.size(), size_t{kMaxTokens});
    auto in = [](const std::vector<int32_t>& v, int32_t t) {
      return std::find(v.begin(), v.end(), t) != v.end();
    };
    for (int k = 1; k < kMaxTokens - 2 && poison_at_ < 0; ++k) {
      const int32_t t = a_ref_[k];
      if (in(a_.prompt, t) || in(b_.prompt, t) || in(b_ref_, t)) continue;
      if (std::find(a_ref_.begin(), a_ref_.begin() + k, t) != a_ref_.begin() + k) continue;
      poison_at_ = k;
      token_ = t;
    }
    ASSERT_GE(poison_at_, 0) << "no token of A's continuation is unique to it";
    poisoned_path_ = dir_.path() + "/tiny";
    fs::copy(testing_util::TinyModelPath(), poisoned_path_, fs::copy_options::recursive);
    const int hidden = clean_->engine->config().hidden_dim;
    ASSERT_TRUE(PlantValue(poisoned_path_, "model.embed_tokens.weight",
                           static_cast<int64_t>(token_) * hidden + 3,
                           std::numeric_limits<float>::quiet_NaN())
                    .ok());
  }

  // A and B submitted together (one batch) to a scheduler over the poisoned model.
  std::pair<Outcome, Outcome> RunBoth(SchedulerOptions o, const ServeRequest& a,
                                      const ServeRequest& b) {
    Rig rig(poisoned_path_);
    Scheduler s(rig.engine.get(), nullptr, nullptr, o);
    EXPECT_TRUE(s.Start().ok());
    auto sa = s.Submit(a);
    auto sb = s.Submit(b);
    EXPECT_TRUE(sa.ok() && sb.ok());
    std::pair<Outcome, Outcome> out{Drain(**sa), Drain(**sb)};
    EXPECT_TRUE(s.healthy()) << "one request's NaN must not fail the engine";
    // The engine keeps serving: B again, alone.
    auto again = s.Submit(b);
    EXPECT_TRUE(again.ok());
    if (again.ok()) {
      EXPECT_EQ(Drain(**again).tokens, b_ref_);
    }
    s.Stop(5);
    EXPECT_EQ(s.metrics().kv_used_pages.load(), 0);
    return out;
  }

  testing_util::TempDir dir_;
  std::unique_ptr<Rig> clean_;
  ServeRequest a_, b_;
  std::vector<int32_t> a_ref_, b_ref_;
  int poison_at_ = -1;
  int32_t token_ = -1;
  std::string poisoned_path_;
};

TEST_F(SchedulerNanTest, PlainDecodingEndsOnlyTheRequestThatMeetsTheNaN) {
  SchedulerOptions o;
  o.max_batch = 4;
  auto [a, b] = RunBoth(o, a_, b_);
  EXPECT_EQ(b.finish_reason, "length");
  EXPECT_EQ(b.tokens, b_ref_);
  EXPECT_EQ(a.finish_reason, "error");
  // Tokens up to and including the poisoned one; feeding it gives NaN logits.
  EXPECT_EQ(a.tokens, std::vector<int32_t>(a_ref_.begin(), a_ref_.begin() + poison_at_ + 1));
  const int pos = static_cast<int>(a_.prompt.size()) + poison_at_;
  EXPECT_NE(a.error.message().find("logits of request #1 at position " + std::to_string(pos) +
                                   " contain NaN"),
            std::string::npos)
      << a.error.ToString();
  EXPECT_NE(a.error.message().find("--check-tensors full"), std::string::npos);
}

TEST_F(SchedulerNanTest, SpeculativeVerificationEndsTheRequestToo) {
  SchedulerOptions o;
  o.max_batch = 4;
  o.spec.algorithm = SpecAlgorithm::kNgram;
  o.spec.tree.num_draft_tokens = 4;
  ServeRequest a = a_;
  a.id = "req-a";
  auto [ra, rb] = RunBoth(o, a, b_);
  EXPECT_EQ(rb.finish_reason, "length");
  EXPECT_EQ(rb.tokens, b_ref_);
  EXPECT_EQ(ra.finish_reason, "error");
  // The poisoned token is delivered when a plain step decided it, not when
  // it was a draft token accepted in the verification that read its row.
  ASSERT_GE(ra.tokens.size(), static_cast<size_t>(poison_at_));
  ASSERT_LE(ra.tokens.size(), static_cast<size_t>(poison_at_ + 1));
  EXPECT_EQ(ra.tokens, std::vector<int32_t>(a_ref_.begin(), a_ref_.begin() + ra.tokens.size()));
  const int pos = static_cast<int>(a_.prompt.size()) + poison_at_;
  EXPECT_NE(ra.error.message().find("logits of request req-a at position " + std::to_string(pos) +
                                    " contain NaN"),
            std::string::npos)
      << ra.error.ToString();
}

TEST_F(SchedulerNanTest, SampledPromptWithTheTokenFailsAtPrefill) {
  SchedulerOptions o;
  o.max_batch = 4;
  ServeRequest a = a_;
  a.prompt = {1, token_, 3, 4};
  a.sampling.temperature = 0.8f;
  a.sampling.seed = 5;
  ServeRequest b = b_;
  auto [ra, rb] = RunBoth(o, a, b);
  EXPECT_EQ(rb.tokens, b_ref_);
  EXPECT_EQ(ra.finish_reason, "error");
  EXPECT_TRUE(ra.tokens.empty());
  // The NaN enters at position 1 and reaches every later row through
  // attention; the first row sampled is the prompt's last.
  EXPECT_NE(ra.error.message().find("at position 3 contain NaN"), std::string::npos)
      << ra.error.ToString();
}

}  // namespace
}  // namespace specd
