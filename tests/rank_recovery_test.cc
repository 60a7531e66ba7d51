// `specd serve` behind the supervisor's proxy, through the real binary: a
// rank killed with SIGKILL (rank 1 or rank 0 itself) ends an open stream with
// an error event naming the dead rank and then [DONE]; with --restart-ranks 1
// /health says "recovering", a request sent meanwhile is answered by the new
// rank group with the same greedy tokens as before the kill, and a second
// kill (no restart left) ends the server with status 1 and the root-cause
// report. The official openai Python client sees the error on its stream. No
// process or shared memory is left behind.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "base/test_reference.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::RunCommand;
using testing::SpecdBinary;
using Serve = testing::ServeProcess;
using testing::ShmEntries;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The pid of the `nth` (0-based) process that logged "rank R ready", waiting
// up to 20 s for it; -1 if it never appears.
int RankPid(const Serve& s, int rank, int nth) {
  const std::regex line("rank " + std::to_string(rank) + " ready \\(pid ([0-9]+)\\)");
  for (int i = 0; i < 400; ++i) {
    const std::string log = s.log();
    int seen = 0;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), line);
         it != std::sregex_iterator(); ++it, ++seen) {
      if (seen == nth) return std::stoi((*it)[1]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Greedy completion: "<status> <token ids>" (the tiny model has no tokenizer).
std::string Completion(int port, int max_tokens = 16) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  const std::string body = "{\"prompt\": [5,6,7,8], \"max_tokens\": " +
                           std::to_string(max_tokens) + ", \"temperature\": 0, \"logprobs\": 1}";
  auto res = c.Post("/v1/completions", body, "application/json");
  if (!res) return "no response";
  if (res->status != 200) return std::to_string(res->status) + " " + res->body;
  auto j = nlohmann::json::parse(res->body);
  return "200 " + j["choices"][0]["logprobs"]["tokens"].dump();
}

// Streams a long completion; `on_first` runs once the first token arrived.
// logprobs: one event per token (the tiny model's tokens have no text).
testing::StreamResult Stream(int port, const std::function<void()>& on_first) {
  return testing::StreamCompletion(port,
                                   "{\"prompt\": [1,2,3], \"max_tokens\": 2000, \"temperature\": 0, "
                                   "\"ignore_eos\": true, \"stream\": true, \"logprobs\": 1}",
                                   on_first);
}

class RankRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(SpecdBinary())) {
      SPECD_REFERENCE_MISSING("the specd binary is not built at " << SpecdBinary());
      return;
    }
    model_ = dir_.path() + "/tiny";
    int st = 0;
    std::string out = RunCommand(SpecdBinary() + " make-model --preset tiny --format safetensors --out " +
                                     model_ + " --seed 11 2>&1",
                                 &st);
    ASSERT_EQ(st, 0) << out;
    shm_before_ = ShmEntries();
  }
  void ExpectNothingLeft() {
    EXPECT_EQ(RunCommand("pgrep -f '[s]pecd serve --model " + model_ + " ' || true"), "");
    EXPECT_EQ(ShmEntries(), shm_before_);
  }
  std::vector<std::string> Args(const std::string& tp, const std::string& restarts) {
    return {"serve", "--model", model_, "--port", "0", "--threads", "1", "--tp", tp,
            "--restart-ranks", restarts};
  }
  // Kills rank `rank` mid-stream and checks the stream's end and the exit.
  void KillMidStream(int rank) {
    Serve s(dir_.path() + "/kill" + std::to_string(rank) + ".log");
    std::string why;
    ASSERT_TRUE(s.Start(Args("2", "0"), "", &why)) << why;
    const int pid = RankPid(s, rank, 0);
    ASSERT_GT(pid, 0) << s.log();
    const testing::StreamResult r = Stream(s.port(), [&] { ::kill(pid, SIGKILL); });
    const size_t err = r.sse.find("data: {\"error\"");
    ASSERT_NE(err, std::string::npos) << r.sse.substr(0, 2000);
    const std::string rest = r.sse.substr(err);
    EXPECT_NE(rest.find("rank " + std::to_string(rank)), std::string::npos) << rest;
    // Rank 0 cannot speak after its own death: the proxy names the cause
    // (with rank 1 dead, rank 0's engine may report the dead peer first).
    if (rank == 0) {
      EXPECT_NE(rest.find("SIGKILL"), std::string::npos) << rest;
    }
    EXPECT_NE(rest.find("\"type\":\"server_error\""), std::string::npos) << rest;
    EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
    std::cout << "rank " << rank << " SIGKILL -> error event on the stream: "
              << r.error_after_s * 1000 << " ms: " << rest.substr(0, rest.find('\n')) << "\n";
    EXPECT_EQ(s.Wait(30), 1) << s.log();
    const std::string log = s.log();
    const size_t root = log.find("root cause: rank " + std::to_string(rank));
    ASSERT_NE(root, std::string::npos) << log;
    EXPECT_NE(log.find("signal 9 (SIGKILL)", root), std::string::npos) << log;
    ExpectNothingLeft();
  }

  testing::TempDir dir_;
  std::string model_;
  int shm_before_ = 0;
};

TEST_F(RankRecoveryTest, Rank1KilledMidStreamEndsItWithErrorEventAndDone) { KillMidStream(1); }

TEST_F(RankRecoveryTest, Rank0KilledMidStreamEndsItWithErrorEventAndDone) { KillMidStream(0); }

TEST_F(RankRecoveryTest, RestartRanksRecoversAndServesTheSameTokens) {
  Serve s(dir_.path() + "/restart.log");
  std::string why;
  ASSERT_TRUE(s.Start(Args("2", "1"), "", &why)) << why;
  const std::string want = Completion(s.port());
  ASSERT_EQ(want.rfind("200 ", 0), 0u) << want;

  const int pid1 = RankPid(s, 1, 0);
  ASSERT_GT(pid1, 0) << s.log();
  const auto killed = Clock::now();
  ASSERT_EQ(::kill(pid1, SIGKILL), 0);
  // /health says "recovering" while the new group starts.
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(10, 0);
  std::string health;
  for (int i = 0; i < 400; ++i) {
    auto h = c.Get("/health");
    health = h ? std::to_string(h->status) + " " + h->body : "no response";
    if (health.find("recovering") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(health.rfind("503 ", 0), 0u) << health << "\n" << s.log();
  EXPECT_NE(health.find("\"status\":\"recovering\""), std::string::npos) << health;
  EXPECT_NE(health.find("rank 1"), std::string::npos) << health;
  // Sent during recovery: held by the proxy, answered by the new group.
  auto during = std::async(std::launch::async, [&] { return Completion(s.port()); });
  EXPECT_EQ(during.get(), want) << s.log();
  for (int i = 0; i < 400; ++i) {
    auto h = c.Get("/health");
    if (h && h->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::cout << "rank 1 SIGKILL -> new group serving (/health 200): " << Since(killed) * 1000
            << " ms\n";
  EXPECT_EQ(Completion(s.port()), want);
  const std::string log = s.log();
  EXPECT_NE(log.find("restarting the rank group (1 of 1 restarts) after: rank 1 died"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("root cause: rank 1"), std::string::npos) << log;

  // No restart left: the next death ends the server with the report.
  const int pid0 = RankPid(s, 0, 1);
  ASSERT_GT(pid0, 0) << s.log();
  ASSERT_EQ(::kill(pid0, SIGKILL), 0);
  EXPECT_EQ(s.Wait(30), 1) << s.log();
  const std::string end = s.log();
  const size_t second = end.rfind("root cause: rank 0");
  ASSERT_NE(second, std::string::npos) << end;
  EXPECT_NE(end.find("signal 9 (SIGKILL)", second), std::string::npos) << end;
  ExpectNothingLeft();
}

// --tp 1 with restarts runs rank 0 as a supervised group of one behind the
// proxy: its death is survived the same way.
TEST_F(RankRecoveryTest, Tp1WithRestartsRecovers) {
  Serve s(dir_.path() + "/tp1.log");
  std::string why;
  ASSERT_TRUE(s.Start(Args("1", "1"), "", &why)) << why;
  const std::string want = Completion(s.port());
  ASSERT_EQ(want.rfind("200 ", 0), 0u) << want;
  const int pid0 = RankPid(s, 0, 0);
  ASSERT_GT(pid0, 0) << s.log();
  ASSERT_EQ(::kill(pid0, SIGKILL), 0);
  // Once the supervisor has seen the death, new requests wait for the new rank 0.
  httplib::Client c("127.0.0.1", s.port());
  for (int i = 0; i < 400; ++i) {
    auto h = c.Get("/health");
    if (h && h->status != 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Completion(s.port()), want) << s.log();
  s.Signal(SIGTERM);
  EXPECT_EQ(s.Wait(30), 0) << s.log();
  ExpectNothingLeft();
}

// The official openai Python client (tests/python/openai_rank_death.py) on a
// stream whose rank 0 is killed: it raises openai.APIError naming the rank
// and the signal (the proxy's words: rank 0 cannot speak after its death).
TEST_F(RankRecoveryTest, OfficialClientRaisesTheErrorOnTheStream) {
  const std::string missing = testing::PythonModuleMissing("openai");
  if (!missing.empty()) SPECD_REFERENCE_MISSING(missing);
  Serve s(dir_.path() + "/client.log");
  std::string why;
  ASSERT_TRUE(s.Start(Args("2", "0"), "", &why)) << why;
  const int pid = RankPid(s, 0, 0);
  ASSERT_GT(pid, 0) << s.log();
  int st = 0;
  const std::string out = RunCommand(
      "SPECD_BASE_URL=http://127.0.0.1:" + std::to_string(s.port()) +
          "/v1 SPECD_MODEL=tiny SPECD_KILL_RANK=0 SPECD_KILL_PID=" + std::to_string(pid) + " '" +
          testing::ReferencePython() + "' '" + SPECD_SOURCE_DIR +
          "/tests/python/openai_rank_death.py' 2>&1",
      &st);
  std::printf("%s", out.c_str());
  EXPECT_EQ(st, 0) << out << "\nserver log:\n" << s.log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  EXPECT_EQ(s.Wait(30), 1) << s.log();
  ExpectNothingLeft();
}

}  // namespace
}  // namespace specd
