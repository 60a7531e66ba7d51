// A NaN in a weight that the default load-time scan does not read (an
// attention projection, a routed expert) ends the requests it reaches with an
// error naming the request and position, instead of token 0 forever: in
// `specd generate` (non-zero exit) and in `specd serve` (HTTP 500, or an SSE
// error event then [DONE]), where the other requests of the batch are
// answered as by a clean copy of the model and the server keeps serving.
// Real `specd` processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <future>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "modelgen/fixture.h"
#include "modelgen/plant_value.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RunCommand;
using testing::ServeProcess;
using testing::SpecdBinary;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string MakeModel(const std::string& dir, const std::string& preset) {
  FixtureOptions o;
  o.preset = preset;
  o.out = dir;
  o.seed = 7;
  Status s = MakeFixture(o);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dir;
}

TEST(NanLogitsTest, GenerateExitsWithAnErrorNamingTheRequestAndPosition) {
  ASSERT_TRUE(fs::exists(SpecdBinary())) << SpecdBinary() << " not built";
  testing::TempDir dir;
  const std::string model = MakeModel(dir.path() + "/tiny", "tiny");
  ASSERT_TRUE(PlantValue(model, "model.layers.0.self_attn.q_proj.weight", 5, kNaN).ok());
  const std::string gen = SpecdBinary() + " generate --model " + model +
                          " --prompt-ids 1,2,3 -n 8 --threads 1 --json";
  for (const std::string extra : {"", " --speculative-algorithm NGRAM"}) {
    int st = 0;
    const std::string out = RunCommand(gen + extra + " 2>&1", &st);
    EXPECT_NE(st, 0) << extra << "\n" << out;
    // Loaded with the default check, the NaN is met at the first sampled row.
    const size_t first = out.find("logits of request #1 at position 2 contain NaN");
    EXPECT_NE(first, std::string::npos) << extra << "\n" << out;
    // Once: the failure report, not also a log line from the scheduler.
    EXPECT_EQ(out.find("logits of request #1", first + 1), std::string::npos)
        << extra << "\n" << out;
    EXPECT_NE(out.find("--check-tensors full"), std::string::npos) << out;
  }
  // The hint holds: the full scan names the tensor at load time.
  int st = 0;
  const std::string out = RunCommand(gen + " --check-tensors full 2>&1", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << out;
}

struct Reply {
  int status = 0;
  std::vector<std::string> tokens;  // logprobs.tokens: "<id>" without a tokenizer
  std::string error;
};

Reply Complete(int port, const std::vector<int>& prompt) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", prompt}, {"max_tokens", 3}, {"logprobs", 0}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  Reply r;
  if (!res) return r;
  r.status = res->status;
  const json j = json::parse(res->body, nullptr, false);
  if (res->status == 200) {
    for (const json& t : j["choices"][0]["logprobs"]["tokens"]) r.tokens.push_back(t);
  } else if (j.contains("error")) {
    r.error = j["error"]["message"];
  }
  return r;
}

// All prompts at once, so they share engine steps.
std::vector<Reply> CompleteAll(int port, const std::vector<std::vector<int>>& prompts) {
  std::vector<std::future<Reply>> f;
  for (const auto& p : prompts) f.push_back(std::async(std::launch::async, Complete, port, p));
  std::vector<Reply> out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

TEST(NanLogitsTest, ServeFailsOnlyTheRequestsTheNaNReachesAndKeepsServing) {
  ASSERT_TRUE(fs::exists(SpecdBinary())) << SpecdBinary() << " not built";
  testing::TempDir dir;
  // A MoE model: a NaN in one routed expert of the last layer reaches only
  // the rows routed to it, so some requests meet it and others do not.
  const std::string clean = MakeModel(dir.path() + "/clean", "deepseek-v3-tiny");
  const std::string poisoned = MakeModel(dir.path() + "/poisoned", "deepseek-v3-tiny");
  ASSERT_TRUE(PlantValue(poisoned, "model.layers.2.mlp.experts.3.down_proj.weight", 0, kNaN).ok());

  std::vector<std::vector<int>> prompts;
  for (int t = 1; t <= 16; ++t) prompts.push_back({5, t});
  std::vector<Reply> want;
  {
    ServeProcess ref(dir.path() + "/clean.log");
    std::string why;
    ASSERT_TRUE(ref.Start({"serve", "--model", clean, "--port", "0", "--threads", "1"}, "", &why))
        << why;
    want = CompleteAll(ref.port(), prompts);
    ref.Signal(SIGTERM);
    EXPECT_EQ(ref.Wait(20), 0);
  }
  ServeProcess serve(dir.path() + "/poisoned.log");
  std::string why;
  ASSERT_TRUE(serve.Start({"serve", "--model", poisoned, "--port", "0", "--threads", "1"}, "",
                          &why))
      << why;
  const std::vector<Reply> got = CompleteAll(serve.port(), prompts);
  int failed = 0, answered = 0;
  int first_failed = -1;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(want[i].status, 200) << "clean model, prompt " << i;
    if (got[i].status == 200) {
      ++answered;
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "prompt " << i;
    } else {
      ++failed;
      if (first_failed < 0) first_failed = static_cast<int>(i);
      EXPECT_EQ(got[i].status, 500) << "prompt " << i;
      EXPECT_NE(got[i].error.find("logits of request"), std::string::npos) << got[i].error;
      EXPECT_NE(got[i].error.find("contain NaN"), std::string::npos) << got[i].error;
      EXPECT_NE(got[i].error.find("--check-tensors full"), std::string::npos) << got[i].error;
    }
  }
  ASSERT_GT(failed, 0) << "no prompt reached the poisoned expert";
  ASSERT_GT(answered, 0) << "every prompt reached the poisoned expert";

  // Streaming: the error arrives as an event, then [DONE].
  httplib::Client c("127.0.0.1", serve.port());
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", prompts[first_failed]}, {"max_tokens", 3}, {"stream", true}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  const size_t err = res->body.find("\"error\"");
  ASSERT_NE(err, std::string::npos) << res->body;
  EXPECT_NE(res->body.find("contain NaN", err), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("data: [DONE]", err), std::string::npos) << res->body;

  // Still healthy, still answering.
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (got[i].status != 200) continue;
    const Reply again = Complete(serve.port(), prompts[i]);
    EXPECT_EQ(again.status, 200);
    EXPECT_EQ(again.tokens, want[i].tokens);
    break;
  }
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(20), 0) << serve.log();
}

}  // namespace
}  // namespace specd
