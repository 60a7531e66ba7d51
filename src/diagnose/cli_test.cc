// Pipes corpus logs through the real `specd diagnose` binary (stdin and file
// arguments) and checks its JSON and exit codes. Skips when the binary has not
// been built.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

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
    if (!fs::exists(kBinary)) GTEST_SKIP() << "specd binary not built at " << kBinary;
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

}  // namespace
