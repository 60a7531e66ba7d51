// Tensor parallelism through the real binary: --tp 1, 2 and 4 give the same
// greedy tokens (also with n-gram speculation, CPU pinning, and ranks started
// by mpirun); a rank that fails at start-up or is killed mid-generation makes
// the supervisor print the root cause first and exit non-zero; SIGINT/SIGTERM
// to the supervisor stop every rank. Nothing is left behind: no process, no
// shared memory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/test_reference.h"
#include "base/mapped_file.h"
#include "test_util.h"

namespace specd {
namespace {

using testing::RunCommand;
using testing::SpecdBinary;

class TpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(SpecdBinary())) SPECD_REFERENCE_MISSING("specd binary not built");
    model_ = dir_.path() + "/tiny";
    int st = 0;
    std::string out = RunCommand(SpecdBinary() + " make-model --preset tiny --format safetensors --out " +
                                     model_ + " --seed 5 2>&1",
                                 &st);
    ASSERT_EQ(st, 0) << out;
  }

  std::vector<int> Tokens(const std::string& extra) {
    int st = 0;
    std::string out = RunCommand(SpecdBinary() + " --log-level warn generate --model " + model_ +
                                     " --prompt-ids 1,2,3,4,5,1,2,3 --max-tokens 24 --json --threads 1 " +
                                     extra + " 2>/dev/null",
                                 &st);
    EXPECT_EQ(st, 0) << extra << "\n" << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.contains("token_ids")) {
      ADD_FAILURE() << "not a JSON result: " << out;
      return {};
    }
    return j["token_ids"].get<std::vector<int>>();
  }

  // Runs `specd generate` on the tiny model with `env` (NAME=VALUE ...)
  // prepended; returns stderr+stdout, *status the exit status, *secs the time.
  std::string Generate(const std::string& env, const std::string& extra, int* status,
                       double* secs) {
    auto t0 = std::chrono::steady_clock::now();
    std::string out = RunCommand(env + " " + SpecdBinary() + " generate --model " + model_ +
                                     " --prompt-ids 1,2,3 --ignore-eos --threads 1 " + extra +
                                     " 2>&1",
                                 status);
    *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }
  void ExpectNoRankLeft() {
    // ("[s]pecd" keeps pgrep's own shell from matching the pattern.)
    EXPECT_EQ(RunCommand("pgrep -f '[s]pecd generate --model " + model_ + " ' || true"), "");
  }

  testing::TempDir dir_;
  std::string model_;
};

// Entries of /dev/shm that specd could have created.
int ShmEntries() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec))
    n += e.path().filename().string().find("specd") != std::string::npos;
  return n;
}

TEST_F(TpTest, SameGreedyTokensAtTp1Tp2Tp4) {
  std::vector<int> one = Tokens("--tp 1");
  ASSERT_EQ(one.size(), 24u);
  EXPECT_EQ(Tokens("--tp 2"), one);
  EXPECT_EQ(Tokens("--tp 4"), one);
  EXPECT_EQ(Tokens("--tp 2 --no-fuse-allreduce-norm"), one);
  EXPECT_EQ(Tokens("--tp 2 --speculative-algorithm NGRAM"), one);
  EXPECT_EQ(Tokens("--tp 2 --cpu-bind cores"), one);
}

TEST_F(TpTest, BadCpuBindIsRefusedWithWhatWasExpected) {
  int st = 0;
  double secs = 0;
  std::string out = Generate("", "--tp 2 --cpu-bind 0", &st, &secs);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("expected one list per rank"), std::string::npos) << out;
}

// The issue: "a rank killed (SIGKILL) mid-generation: the supervisor reports
// which rank died and how, stops the rest cleanly".
TEST_F(TpTest, RankKilledMidGenerationIsReportedAndTheRestStopped) {
  const int shm_before = ShmEntries();
  for (int victim : {1, 0}) {
    SCOPED_TRACE("killed rank " + std::to_string(victim));
    const std::string report = dir_.path() + "/kill" + std::to_string(victim) + ".json";
    int st = 0;
    double secs = 0;
    // Its 200th collective is a few dozen tokens into the 1000.
    std::string out = Generate("SPECD_FAULT_KILL_RANK=" + std::to_string(victim) + ":200",
                               "--tp 2 --max-tokens 1000 --json --report-file " + report, &st,
                               &secs);
    EXPECT_EQ(st, 1) << out;
    EXPECT_LT(secs, 20.0) << out;  // did not hang
    const size_t root = out.find("root cause: rank " + std::to_string(victim));
    ASSERT_NE(root, std::string::npos) << out;
    EXPECT_NE(out.find("signal 9 (SIGKILL)", root), std::string::npos) << out;
    EXPECT_EQ(out.find("\"token_ids\""), std::string::npos) << "no result after a failure";
    auto rep = ReadFileToString(report);
    ASSERT_TRUE(rep.ok());
    auto j = nlohmann::json::parse(*rep, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << *rep;
    EXPECT_EQ(j["root_cause"]["rank"], victim) << *rep;
    EXPECT_EQ(j["root_cause"]["signal"], 9) << *rep;
    ExpectNoRankLeft();
  }
  EXPECT_EQ(ShmEntries(), shm_before);
}

// The issue: "SIGINT / SIGTERM to the supervisor: clean shutdown of all ranks".
TEST_F(TpTest, SigintOrSigtermToSupervisorStopsEveryRank) {
  const int shm_before = ShmEntries();
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig == SIGINT ? "SIGINT" : "SIGTERM");
    // One log per signal: with a shared name the wait below could see the
    // previous run's "ranks ready" before the new child truncated the file.
    const std::string log = dir_.path() + "/signal-" + std::to_string(sig) + ".log";
    // A generation far longer than the test: 2000 tokens with a 1000-token prompt.
    std::string ids = "1";
    for (int i = 0; i < 999; ++i) ids += "," + std::to_string(3 + i % 200);
    pid_t pid = ::fork();
    if (pid == 0) {
      std::FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      std::FILE* o = std::freopen("/dev/null", "w", stdout);
      (void)o;
      const std::string bin = SpecdBinary();
      ::execl(bin.c_str(), bin.c_str(), "generate", "--model", model_.c_str(), "--tp", "2",
              "--threads", "1", "--ignore-eos", "--max-tokens", "1040", "--prompt-ids",
              ids.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    auto read_log = [&] {
      std::ifstream f(log);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    for (int i = 0; i < 2000 && read_log().find("ranks ready") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_NE(read_log().find("ranks ready"), std::string::npos) << read_log();
    ::kill(pid, sig);
    int st = 0, code = -1;
    for (int i = 0; i < 400; ++i) {  // 20 s: did not hang
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (code == -1) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    EXPECT_EQ(code, 128 + sig) << read_log();
    EXPECT_EQ(read_log().find("root cause"), std::string::npos) << "an interrupt is no failure";
    ExpectNoRankLeft();
  }
  EXPECT_EQ(ShmEntries(), shm_before);
}

// The issue: "mpirun -np N specd generate --comm mpi ... works with ranks
// started by Open MPI": the same greedy tokens as --tp 1.
TEST_F(TpTest, MpirunRanksGiveTheSameGreedyTokens) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    SPECD_REFERENCE_MISSING("mpirun not installed (Open MPI; scripts/setup.sh installs it)");
  std::vector<int> one = Tokens("--tp 1");
  ASSERT_EQ(one.size(), 24u);
  // Leak checks off in the ranks (sanitizer builds): Open MPI's unloaded
  // plugins keep allocations LeakSanitizer cannot attribute.
  std::string mpirun = "LSAN_OPTIONS=detect_leaks=0 timeout 120 mpirun -np 2 --oversubscribe --bind-to none";
  if (::geteuid() == 0) mpirun += " --allow-run-as-root";
  mpirun += " --mca btl_base_warn_component_unused 0 ";
  int st = 0;
  std::string out = RunCommand(mpirun + SpecdBinary() + " --log-level warn generate --comm mpi --model " +
                                   model_ + " --prompt-ids 1,2,3,4,5,1,2,3 --max-tokens 24 --json "
                                   "--threads 1 2>/dev/null",
                               &st);
  ASSERT_EQ(st, 0) << out;
  // Only rank 0 prints the result.
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["token_ids"].get<std::vector<int>>(), one);
}

TEST_F(TpTest, StartupFailureReportsRootCauseFirst) {
  std::string report = dir_.path() + "/report.json";
  auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  std::string out = RunCommand(SpecdBinary() + " generate --model " + dir_.path() +
                                   "/missing --tp 2 --threads 1 --prompt-ids 1 --report-file " +
                                   report + " 2>&1",
                               &st);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(st, 0);
  EXPECT_LT(secs, 10.0);  // generous on a loaded machine; the design target is 2 s
  size_t block = out.find("root cause: rank ");
  ASSERT_NE(block, std::string::npos) << out;
  EXPECT_NE(out.find("[load weights] failed first", block), std::string::npos) << out;
  EXPECT_NE(out.find("missing", block), std::string::npos) << out;
  auto rep = ReadFileToString(report);
  ASSERT_TRUE(rep.ok());
  auto j = nlohmann::json::parse(*rep, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << *rep;
  ASSERT_TRUE(j["root_cause"].is_object()) << *rep;
  EXPECT_EQ(j["root_cause"]["stage"], "load weights");
  // No rank outlives the supervisor.
  // ("[s]pecd" keeps pgrep's own shell from matching the pattern.)
  std::string left = RunCommand("pgrep -f '[s]pecd generate --model " + dir_.path() + "/missing' || true");
  EXPECT_EQ(left, "");
}

}  // namespace
}  // namespace specd

namespace specd {
namespace {

// The embedded demo model with its trained EAGLE-3 head: speculative greedy
// output equals plain greedy output, at TP 1 and 2, and drafts get accepted.
TEST(DemoModelTest, TrainedEagle3HeadGreedyEqualsPlainGreedy) {
  const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
  if (!std::filesystem::exists(testing::SpecdBinary()) ||
      !std::filesystem::exists(demo + "/eagle3/config.json"))
    SPECD_REFERENCE_MISSING("specd binary or the demo model pair is missing");
  auto run = [&](const std::string& extra, nlohmann::json* stats = nullptr) {
    int st = 0;
    std::string out = testing::RunCommand(
        testing::SpecdBinary() + " --log-level warn generate --model " + demo +
            " --prompt \"It is a truth universally acknowledged\" --max-tokens 48 --json "
            "--threads 1 " + extra + " 2>/dev/null",
        &st);
    EXPECT_EQ(st, 0) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded()) {
      ADD_FAILURE() << out;
      return std::vector<int>{};
    }
    if (stats) *stats = j["stats"];
    return j["token_ids"].get<std::vector<int>>();
  };
  std::vector<int> plain = run("--speculative-algorithm NONE");
  ASSERT_FALSE(plain.empty());
  const std::string eagle = "--speculative-algorithm EAGLE3 --draft-model " + demo + "/eagle3";
  // The auto shape (default) may decide that drafting does not pay here; a
  // fixed shape drafts every step.
  EXPECT_EQ(run(eagle), plain);
  nlohmann::json stats;
  EXPECT_EQ(run(eagle + " --speculative-num-steps 5", &stats), plain);
  EXPECT_GT(stats["accept_length_mean"].get<double>(), 1.0);
  EXPECT_EQ(run(eagle + " --speculative-eagle-topk 1"), plain);
  EXPECT_EQ(run(eagle + " --tp 2"), plain);
  EXPECT_EQ(run(eagle + " --tp 2 --speculative-num-steps 3"), plain);
}

}  // namespace
}  // namespace specd
