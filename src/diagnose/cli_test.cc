// Pipes corpus logs through the real `specd diagnose` binary (stdin and file
// arguments) and checks its JSON and exit codes. Skips when the binary has not
// been built (fails with CI=true).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/test_reference.h"

namespace {

namespace fs = std::filesystem;

const std::string kBinary = std::string(SPECD_BINARY_DIR) + "/specd";
const std::string kCorpus = std::string(SPECD_SOURCE_DIR) + "/tests/diagnose/corpus/";

struct ShellResult {
  std::string out;
  int exit_code = -1;
};

ShellResult Shell(const std::string& cmd) {
  ShellResult r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kBinary)) SPECD_REFERENCE_MISSING("specd binary not built at " << kBinary);
  }
};

TEST_F(CliTest, JsonFromStdin) {
  ShellResult r = Shell(kBinary + " diagnose --json < " + kCorpus + "keyerror12_sglang_tp8.log");
  ASSERT_EQ(r.exit_code, 1) << r.out;  // 1: a failure was found
  nlohmann::json j = nlohmann::json::parse(r.out);  // exactly one object
  EXPECT_TRUE(j["found"].get<bool>());
  EXPECT_EQ(j["cause"]["type"], "KeyError");
  EXPECT_EQ(j["cause"]["message"], "12");
  EXPECT_EQ(j["cause"]["process"], "TP0");
  EXPECT_EQ(j["signature"], "unsupported_gpu_arch");
  EXPECT_EQ(j["input"]["files"][0], "<stdin>");
  EXPECT_FALSE(j["evidence"].empty());
}

TEST_F(CliTest, ReversedStdinIsReadAgainFromTheSpool) {
  ShellResult r = Shell("cat " + kCorpus + "reversed_order.log | " + kBinary + " diagnose --json -");
  ASSERT_EQ(r.exit_code, 1) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cause"]["type"], "KeyError");
  EXPECT_TRUE(j["input"]["reversed"].get<bool>());
}

TEST_F(CliTest, ExitCodesAndText) {
  ShellResult ok = Shell(kBinary + " diagnose " + kCorpus + "no_error.log " + kCorpus + "empty.log");
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.out.rfind("no failure found", 0), 0u) << ok.out;

  ShellResult found = Shell(kBinary + " diagnose " + kCorpus + "specd_text.log");
  EXPECT_EQ(found.exit_code, 1);
  EXPECT_EQ(found.out.rfind("root cause: [load weights] NotFound", 0), 0u) << found.out;

  ShellResult missing = Shell(kBinary + " diagnose /nonexistent/specd.log 2>&1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("/nonexistent/specd.log"), std::string::npos) << missing.out;

  ShellResult help = Shell(kBinary + " diagnose --help");
  EXPECT_NE(help.out.find("Exit codes"), std::string::npos);
}

// specd's own tensor-parallel failures, produced by the real binary (the
// faults of tests/tp_test.cc) and read back by `specd diagnose`: the root
// cause must be the failing rank, not the supervisor's report block or the
// peers' consequences.
class OwnFailuresTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (IsSkipped()) return;
    dir_ = fs::temp_directory_path() / ("specd_diag_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  nlohmann::json Diagnose(const fs::path& log) {
    ShellResult r = Shell(kBinary + " diagnose --json " + log.string());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    return nlohmann::json::parse(r.out);
  }
  fs::path dir_;
};

TEST_F(OwnFailuresTest, RankKilledMidGeneration) {
  const fs::path log = dir_ / "killed.log";
  // Rank 1 raises SIGKILL at its 40th collective, inside the first steps.
  ShellResult run = Shell("SPECD_FAULT_KILL_RANK=1:40 timeout 60 " + kBinary +
                          " generate --tp 2 --threads 1 -p Hello -n 32 > " + log.string() + " 2>&1");
  ASSERT_NE(run.exit_code, 0);
  nlohmann::json j = Diagnose(log);
  EXPECT_TRUE(j["found"].get<bool>());
  EXPECT_EQ(j["cause"]["rank"], 1) << j.dump(2);
  EXPECT_NE(j["cause"]["message"].get<std::string>().find("signal 9"), std::string::npos) << j.dump(2);
  ASSERT_FALSE(j["consequences"].empty()) << j.dump(2);
  EXPECT_EQ(j["consequences"][0]["rank"], 0);  // rank 0 saw its peer die
}

// --log-format json: every stderr line is one JSON object, the supervisor's
// report included, and diagnose still names the dead rank.
TEST_F(OwnFailuresTest, RankKilledWithJsonLogs) {
  const fs::path log = dir_ / "killed.jsonl";
  ShellResult run = Shell("SPECD_FAULT_KILL_RANK=1:40 timeout 60 " + kBinary +
                          " --log-format json generate --tp 2 --threads 1 -p Hello -n 32 2> " +
                          log.string() + " > /dev/null");
  ASSERT_NE(run.exit_code, 0);
  std::ifstream in(log);
  int lines = 0;
  bool report = false;
  for (std::string l; std::getline(in, l); ++lines) {
    nlohmann::json e = nlohmann::json::parse(l, nullptr, false);
    ASSERT_FALSE(e.is_discarded()) << "not JSON: " << l;
    if (e.contains("report")) {
      report = true;
      EXPECT_EQ(e["rank"], 1) << l;
      EXPECT_EQ(e["report"]["root_cause"]["signal"], 9) << l;
    }
  }
  EXPECT_GT(lines, 0);
  EXPECT_TRUE(report);
  nlohmann::json j = Diagnose(log);
  EXPECT_EQ(j["cause"]["rank"], 1) << j.dump(2);
  EXPECT_NE(j["cause"]["message"].get<std::string>().find("signal 9"), std::string::npos) << j.dump(2);
}

TEST_F(OwnFailuresTest, TruncatedCheckpointAtStartUp) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  const fs::path demo = fs::path(SPECD_SOURCE_DIR) / "models" / "demo";
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"}) {
    fs::copy_file(demo / f, model / f);
  }
  fs::resize_file(model / "model.safetensors", fs::file_size(model / "model.safetensors") / 2);
  const fs::path log = dir_ / "truncated.log";
  ShellResult run = Shell("timeout 60 " + kBinary + " generate --tp 2 --model " + model.string() +
                          " -p Hello -n 4 > " + log.string() + " 2>&1");
  ASSERT_NE(run.exit_code, 0);
  nlohmann::json j = Diagnose(log);
  EXPECT_EQ(j["cause"]["type"], "Corruption") << j.dump(2);
  EXPECT_EQ(j["cause"]["stage"], "load weights");
  EXPECT_NE(j["cause"]["message"].get<std::string>().find("model.safetensors"), std::string::npos);
  // Both ranks failed reading the same file; the supervisor's block is not a third failure.
  EXPECT_EQ(j["ranks_failed_same_way"], 2) << j.dump(2);
  EXPECT_TRUE(j["other_failures"].empty()) << j.dump(2);
}

}  // namespace
