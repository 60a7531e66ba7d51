// `specd serve --tp 2` through the real binary: the same greedy tokens as
// --tp 1 (also for concurrent, continuously batched requests), SIGTERM or
// SIGINT shuts every rank down (exit 0; an in-flight stream past the grace
// period ends with an error event), and a rank killed mid-stream
// (SIGKILL, via the SPECD_FAULT_KILL_RANK test hook) ends the stream with an
// error event instead of hanging, after which the server exits with status 1
// and the supervisor names the dead rank (also when it dies while the server
// is idle). No process or shared memory is left behind.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "base/test_reference.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::SpecdBinary;
using Serve = testing::ServeProcess;
using testing::ShmEntries;

// A completion's generated token ids (the "<id>" strings of logprobs.tokens:
// the tiny model has no tokenizer).
std::vector<std::string> Completion(int port, const std::string& prompt_ids, int max_tokens) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const std::string body = "{\"prompt\": [" + prompt_ids + "], \"max_tokens\": " +
                           std::to_string(max_tokens) + ", \"temperature\": 0, \"logprobs\": 1}";
  auto res = c.Post("/v1/completions", body, "application/json");
  if (!res || res->status != 200) {
    ADD_FAILURE() << "completion failed: " << (res ? res->body : "no response");
    return {};
  }
  auto j = nlohmann::json::parse(res->body);
  return j["choices"][0]["logprobs"]["tokens"].get<std::vector<std::string>>();
}

// Streams a long completion; `on_first` runs after the first token event.
// logprobs: one event per token (the tiny model's tokens have no text).
// Returns the raw SSE text.
std::string Stream(int port, int max_tokens, const std::function<void()>& on_first) {
  return testing::StreamCompletion(port,
                                   "{\"prompt\": [1,2,3], \"max_tokens\": " +
                                       std::to_string(max_tokens) +
                                       ", \"temperature\": 0, \"ignore_eos\": true, "
                                       "\"stream\": true, \"logprobs\": 1}",
                                   on_first)
      .sse;
}

class TpServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(SpecdBinary())) SPECD_REFERENCE_MISSING("specd binary not built");
    model_ = dir_.path() + "/tiny";
    int st = 0;
    std::string out = RunCommand(SpecdBinary() + " make-model --preset tiny --format safetensors --out " +
                                     model_ + " --seed 7 2>&1",
                                 &st);
    ASSERT_EQ(st, 0) << out;
    shm_before_ = ShmEntries();
  }
  void ExpectNothingLeft() {
    // ("[s]pecd" keeps pgrep's own shell from matching the pattern.)
    EXPECT_EQ(RunCommand("pgrep -f '[s]pecd serve --model " + model_ + " ' || true"), "");
    EXPECT_EQ(ShmEntries(), shm_before_);
  }
  std::vector<std::string> Args(const std::string& tp, const std::string& grace = "5") {
    return {"serve", "--model", model_, "--port", "0", "--threads", "1", "--tp", tp,
            "--shutdown-grace", grace};
  }

  testing::TempDir dir_;
  std::string model_;
  int shm_before_ = 0;
};

TEST_F(TpServeTest, SameTokensAsTp1AndSigtermStopsEveryRank) {
  const std::vector<std::string> prompts = {"1,2,3,4,5,1,2,3", "7,8,9", "4,4,4,4", "10,20,30,40,50"};
  std::vector<std::vector<std::string>> want;
  {
    Serve one(dir_.path() + "/tp1.log");
    std::string why;
    ASSERT_TRUE(one.Start(Args("1"), "", &why)) << why;
    for (const std::string& p : prompts) want.push_back(Completion(one.port(), p, 16));
    one.Signal(SIGTERM);
    EXPECT_EQ(one.Wait(20), 0) << one.log();
  }
  Serve two(dir_.path() + "/tp2.log");
  std::string why;
  ASSERT_TRUE(two.Start(Args("2"), "", &why)) << why;
  // Concurrent requests: batched together on rank 0, followed by rank 1.
  std::vector<std::future<std::vector<std::string>>> got;
  for (const std::string& p : prompts)
    got.push_back(std::async(std::launch::async, [&, p] { return Completion(two.port(), p, 16); }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<std::string> g = got[i].get();
    EXPECT_EQ(g.size(), 16u);
    EXPECT_EQ(g, want[i]) << "prompt " << prompts[i];
  }
  // Idle past a heartbeat: rank 1 keeps following.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(Completion(two.port(), prompts[0], 16), want[0]);
  two.Signal(SIGTERM);
  EXPECT_EQ(two.Wait(20), 0) << two.log();
  // N-gram speculation at --tp 2: verification steps batched across
  // requests, still the plain greedy tokens.
  Serve ngram(dir_.path() + "/ngram.log");
  std::vector<std::string> args = Args("2");
  args.insert(args.end(), {"--speculative-algorithm", "NGRAM"});
  ASSERT_TRUE(ngram.Start(args, "", &why)) << why;
  got.clear();
  for (const std::string& p : prompts)
    got.push_back(std::async(std::launch::async, [&, p] { return Completion(ngram.port(), p, 16); }));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i].get(), want[i]) << prompts[i];
  ngram.Signal(SIGTERM);
  EXPECT_EQ(ngram.Wait(20), 0) << ngram.log();
  ExpectNothingLeft();
}

TEST_F(TpServeTest, SigintDuringStreamEndsItWithErrorEventAndExitsCleanly) {
  Serve s(dir_.path() + "/sigint.log");
  std::string why;
  ASSERT_TRUE(s.Start(Args("2", "0"), "", &why)) << why;
  std::string sse = Stream(s.port(), 2000, [&] { s.Signal(SIGINT); });
  EXPECT_NE(sse.find("data: {\"error\""), std::string::npos) << sse.substr(0, 2000);
  EXPECT_NE(sse.find("data: [DONE]"), std::string::npos) << sse.substr(0, 2000);
  EXPECT_EQ(s.Wait(20), 0) << s.log();
  ExpectNothingLeft();
}

TEST_F(TpServeTest, RankKilledMidStreamEndsItWithErrorEventAndExits) {
  Serve s(dir_.path() + "/kill.log");
  std::string why;
  // Rank 1 dies at its 400th collective: a few dozen tokens into the stream.
  ASSERT_TRUE(s.Start(Args("2"), "SPECD_FAULT_KILL_RANK=1:400", &why)) << why;
  auto t0 = std::chrono::steady_clock::now();
  std::string sse = Stream(s.port(), 2000, nullptr);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 20.0);  // did not hang
  EXPECT_NE(sse.find("\"choices\""), std::string::npos)
      << "no token before the kill: " << sse.substr(0, 2000) << "\n" << s.log();
  EXPECT_NE(sse.find("data: {\"error\""), std::string::npos) << sse.substr(0, 2000);
  EXPECT_NE(sse.find("data: [DONE]"), std::string::npos) << sse.substr(0, 2000);
  EXPECT_EQ(s.Wait(20), 1) << s.log();
  const std::string log = s.log();
  const size_t root = log.find("root cause: rank 1");
  ASSERT_NE(root, std::string::npos) << log;
  EXPECT_NE(log.find("signal 9 (SIGKILL)", root), std::string::npos) << log;
  ExpectNothingLeft();
}

// /health turns 200 only once every rank is ready: rank 1 dies at its first
// collective (start-up), so the server never becomes healthy and exits 1.
TEST_F(TpServeTest, RankDyingAtStartupNeverLetsHealthTurn200) {
  Serve s(dir_.path() + "/startup.log");
  std::string why;
  EXPECT_FALSE(s.Start(Args("2"), "SPECD_FAULT_KILL_RANK=1:1", &why)) << "healthy without rank 1";
  EXPECT_EQ(s.early_exit(), 1) << why;
  const std::string log = s.log();
  EXPECT_NE(log.find("root cause: rank 1"), std::string::npos) << log;
  EXPECT_EQ(log.find("[serve] ready"), std::string::npos) << log;
  ExpectNothingLeft();
}

// A rank that dies while the server is idle is noticed by the next
// heartbeat step: /health stops answering 200 and the server exits 1.
TEST_F(TpServeTest, RankKilledWhileIdleIsNoticedAndTheServerExits) {
  Serve s(dir_.path() + "/idle.log");
  std::string why;
  ASSERT_TRUE(s.Start(Args("2"), "", &why)) << why;
  std::smatch m;
  const std::regex pid_line("rank 1 ready \\(pid ([0-9]+)\\)");
  std::string log = s.log();
  for (int i = 0; i < 100 && !std::regex_search(log, m, pid_line); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = s.log();
  }
  ASSERT_TRUE(std::regex_search(log, m, pid_line)) << log;
  ASSERT_EQ(::kill(std::stoi(m[1]), SIGKILL), 0);
  EXPECT_EQ(s.Wait(20), 1) << s.log();
  const std::string after = s.log();
  EXPECT_NE(after.find("root cause: rank 1"), std::string::npos) << after;
  EXPECT_NE(after.find("signal 9 (SIGKILL)"), std::string::npos) << after;
  ExpectNothingLeft();
}

}  // namespace
}  // namespace specd
