// End to end: a real `specd serve` process on a free port, driven by the
// official `openai` npm client (tests/node/openai_e2e.mjs). The model is a
// random-weight tiny Llama with the demo model's tokenizer (no chat
// template, so chat uses the fallback template).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "loader/fixture.h"
#include "loader/model_writer.h"

namespace specd::server {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string RunShell(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

class ServeProcess {
 public:
  // Starts `specd serve ARGS` with stderr to a log file; waits for /health.
  bool Start(const std::vector<std::string>& args, std::string* why) {
    log_ = (fs::temp_directory_path() / ("specd-serve-" + std::to_string(::getpid()) + ".log"))
               .string();
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_.c_str(), "w", stderr);
      (void)f;
      std::vector<char*> argv;
      const std::string bin = std::string(SPECD_BINARY_DIR) + "/specd";
      argv.push_back(const_cast<char*>(bin.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 600; ++i) {
      std::smatch m;
      const std::string log = ReadAll(log_);
      if (port_ == 0 && std::regex_search(log, m, listening)) port_ = std::stoi(m[1]);
      if (port_ != 0) {
        httplib::Client c("127.0.0.1", port_);
        auto res = c.Get("/health");
        if (res && res->status == 200) return true;
      }
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        *why = "specd serve exited early:\n" + log;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    *why = "specd serve not healthy after 60 s:\n" + ReadAll(log_);
    return false;
  }
  // SIGTERM, then the exit status (-1 if it had to be killed).
  int Stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }
  ~ServeProcess() {
    Stop();
    std::error_code ec;
    fs::remove(log_, ec);
  }
  int port() const { return port_; }
  std::string log() const { return ReadAll(log_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

TEST(OpenAiE2eTest, OfficialClientAgainstSpecdServe) {
  const std::string src = SPECD_SOURCE_DIR;
  const std::string node_dir = src + "/tests/node";
  int st = 0;
  RunShell("node --version 2>/dev/null", &st);
  if (st != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(node_dir + "/node_modules/openai"))
    GTEST_SKIP() << "the openai npm package is not installed (cd tests/node && npm install)";
  if (!fs::exists(std::string(SPECD_BINARY_DIR) + "/specd"))
    GTEST_SKIP() << "the specd binary is not built";
  const std::string tok_dir = src + "/models/demo";
  if (!fs::exists(tok_dir + "/tokenizer.json"))
    GTEST_SKIP() << "models/demo/tokenizer.json is missing";

  // Tiny random weights at the demo tokenizer's vocabulary.
  std::string tmpl = (fs::temp_directory_path() / "specd-e2e-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  auto cfg = FixturePreset("tiny");
  ASSERT_TRUE(cfg.ok());
  ModelConfig c = *cfg;
  c.vocab_size = 2048;
  c.max_seq_len = 512;
  c.bos_id = 2046;
  c.eos_ids = {2047};
  const std::string model = dir + "/model";
  ASSERT_TRUE(WriteSafetensorsModel(c, RandomWeights(c, 3), DType::kF32, model).ok());
  fs::copy_file(tok_dir + "/tokenizer.json", model + "/tokenizer.json");
  if (fs::exists(tok_dir + "/tokenizer_config.json"))
    fs::copy_file(tok_dir + "/tokenizer_config.json", model + "/tokenizer_config.json");

  const std::string key = "test-key-123";
  ServeProcess serve;
  std::string why;
  ASSERT_TRUE(serve.Start({"serve", "--model", model, "--port", "0", "--api-key", key,
                           "--served-model-name", "tiny-demo", "--threads", "2"},
                          &why))
      << why;
  const std::string cmd = "cd '" + node_dir + "' && SPECD_BASE_URL=http://127.0.0.1:" +
                          std::to_string(serve.port()) + "/v1 SPECD_API_KEY=" + key +
                          " SPECD_MODEL=tiny-demo node openai_e2e.mjs 2>&1";
  const std::string out = RunShell(cmd, &st);
  std::printf("%s", out.c_str());  // one line per check of the node script
  EXPECT_EQ(st, 0) << out << "\nserver log:\n" << serve.log();
  EXPECT_NE(out.find("all checks passed"), std::string::npos) << out;
  // SIGTERM: a clean shutdown with exit status 0.
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace specd::server
