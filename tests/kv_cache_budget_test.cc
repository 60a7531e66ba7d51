// The KV cache is sized to what a run asks for (issue 22): `specd generate`
// reserves its one request's tokens, not the model's context; a request that
// does not fit an explicit budget ends `generate` with a message naming the
// numbers, and `specd serve` answers it 400 and keeps serving. Real `specd`
// processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "modelgen/fixture.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RunCommand;
using testing::ServeProcess;
using testing::SpecdBinary;

std::string MakeTinyModel(const std::string& dir) {
  FixtureOptions o;
  o.preset = "tiny";
  o.out = dir;
  o.seed = 3;
  Status s = MakeFixture(o);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dir;
}

// The capacity the "load weights" log line reports, or -1.
int LoggedKvTokens(const std::string& log) {
  std::smatch m;
  const std::regex re("KV cache ([0-9]+) tokens");
  return std::regex_search(log, m, re) ? std::stoi(m[1]) : -1;
}

TEST(KvCacheBudgetTest, GenerateReservesItsRequestAndRefusesWhatDoesNotFit) {
  ASSERT_TRUE(fs::exists(SpecdBinary())) << SpecdBinary() << " not built";
  testing::TempDir dir;
  const std::string model = MakeTinyModel(dir.path() + "/tiny");
  const std::string gen = SpecdBinary() + " generate --model " + model +
                          " --prompt-ids 1,2,3,4,5 --ignore-eos --threads 1 --json";
  int st = 0;
  // 5 prompt tokens + 20 generated: two pages of 16, not the context's worth.
  std::string out = RunCommand(gen + " -n 20 2>&1", &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_EQ(LoggedKvTokens(out), 32) << out;
  const size_t brace = out.find("{\"");
  ASSERT_NE(brace, std::string::npos) << out;
  const json j = json::parse(out.substr(brace, out.find('\n', brace) - brace));
  EXPECT_EQ(j["token_ids"].size(), 20u);

  // An explicit budget smaller than prompt + max tokens: a clear error.
  out = RunCommand(gen + " -n 40 --kv-cache-tokens 32 2>&1", &st);
  EXPECT_EQ(st, 1) << out;
  EXPECT_NE(out.find("5 prompt tokens + max_tokens 40 = 45 tokens do not fit the KV cache of 32 "
                     "tokens"),
            std::string::npos)
      << out;
}

struct Reply {
  int status = 0;
  int completion_tokens = 0;
  std::string error;
};

Reply Complete(int port, int max_tokens) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
                     {"max_tokens", max_tokens},
                     {"ignore_eos", true}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  Reply r;
  if (!res) return r;
  r.status = res->status;
  const json j = json::parse(res->body, nullptr, false);
  if (res->status == 200) r.completion_tokens = j["usage"]["completion_tokens"];
  else if (j.contains("error")) r.error = j["error"]["message"];
  return r;
}

TEST(KvCacheBudgetTest, ServeAnswersARequestTooLargeForTheCacheWith400AndKeepsServing) {
  ASSERT_TRUE(fs::exists(SpecdBinary())) << SpecdBinary() << " not built";
  testing::TempDir dir;
  const std::string model = MakeTinyModel(dir.path() + "/tiny");
  ServeProcess serve(dir.path() + "/serve.log");
  std::string why;
  ASSERT_TRUE(serve.Start({"serve", "--model", model, "--port", "0", "--threads", "1",
                           "--kv-cache-tokens", "64"},
                          "", &why))
      << why;
  EXPECT_EQ(LoggedKvTokens(serve.log()), 64) << serve.log();
  const Reply big = Complete(serve.port(), 100);
  EXPECT_EQ(big.status, 400);
  EXPECT_NE(big.error.find("10 prompt tokens + max_tokens 100 = 110 tokens do not fit the KV "
                           "cache of 64 tokens"),
            std::string::npos)
      << big.error;
  // The largest request that fits, and the server still answers.
  const Reply fits = Complete(serve.port(), 54);
  EXPECT_EQ(fits.status, 200) << fits.error;
  EXPECT_EQ(fits.completion_tokens, 54);
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(20), 0) << serve.log();
}

TEST(KvCacheBudgetTest, ServeSizesTheCacheFromAMemoryBudget) {
  ASSERT_TRUE(fs::exists(SpecdBinary())) << SpecdBinary() << " not built";
  testing::TempDir dir;
  const std::string model = MakeTinyModel(dir.path() + "/tiny");
  ServeProcess serve(dir.path() + "/serve.log");
  std::string why;
  ASSERT_TRUE(serve.Start({"serve", "--model", model, "--port", "0", "--threads", "1",
                           "--kv-cache-memory", "1M"},
                          "", &why))
      << why;
  // tiny: 2 layers x (K + V) x 32 floats = 512 bytes per token; 1 MiB / 512 = 2048 tokens,
  // capped at 4 x the context.
  const json cfg = json::parse(testing::ReadFile(model + "/config.json"));
  const int per_token = 2 * 4 * cfg["num_hidden_layers"].get<int>() *
                        cfg["num_key_value_heads"].get<int>() *
                        (cfg["hidden_size"].get<int>() / cfg["num_attention_heads"].get<int>());
  const int want = std::min((1 << 20) / per_token / 16 * 16,
                            4 * cfg["max_position_embeddings"].get<int>());
  EXPECT_EQ(LoggedKvTokens(serve.log()), want) << serve.log();
  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(20), 0) << serve.log();
}

}  // namespace
}  // namespace specd
