// Batch invariance end to end, through `specd serve`: 16 concurrent
// completions (six prompts, some sent several times at once, greedy and
// seeded at temperature 1) get the same text as each one sent alone, with and
// without EAGLE-3 speculation, at TP 1 and 2. A seeded request also gets the
// same text from a speculative server as from a plain one: another process,
// with its own start-up timings and so its own draft shapes.
//
// Models: the demo pair in BF16 under --deterministic (AMX-BF16 tiles sum in
// another order than the one-token kernel), and its Q8_0 / Q4_0 GGUFs
// (`specd quantize`) with the default kernels, which are batch-invariant.
// Every case runs once per kernel path of this CPU: the servers are started
// with SPECD_KERNEL_ISA=<level> and SPECD_AMX=0|1 (kernel_paths_test_util.h).
// Quantized rows run at TP 1 only: the demo's 432-unit MLP cannot be cut on
// 32-element blocks for two ranks.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/kernel_paths_test_util.h"
#include "serve_process.h"
#include "test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::ServeProcess;
using testing::SpecdBinary;
using testing::TempDir;

// Token ids (the quantized GGUFs carry no tokenizer) of "Once upon a time",
// "The capital of France is", "Tom had a little dog. One day", "Lily wanted
// to", "The sun was shining and the birds" and "She opened the box and found"
// under models/demo/tokenizer.json, BOS first.
const std::vector<std::vector<int>> kPrompts = {
    {2046, 79, 1014, 866, 258, 579},
    {2046, 637, 277, 1192, 271, 346, 281, 497, 2035, 363},
    {2046, 84, 299, 339, 258, 577, 411, 103, 46, 1176, 413, 648},
    {2046, 76, 624, 1483, 272},
    {2046, 637, 345, 110, 304, 440, 259, 278, 282, 266, 269, 336, 100, 115},
    {2046, 995, 733, 889, 266, 1940, 120, 282, 927},
};
constexpr int kRequests = 16;
constexpr int kMaxTokens = 24;

struct Request {
  std::vector<int> prompt;
  double temperature;
  uint64_t seed;
};

// Request r: prompt r % 6; requests 0-5 and 12-15 greedy, 6-11 at
// temperature 1 with a seed of their prompt's. So 12-15 repeat 0-3, and 6-11
// are 0-5 sampled.
std::vector<Request> Requests() {
  std::vector<Request> reqs;
  for (int r = 0; r < kRequests; ++r)
    reqs.push_back({kPrompts[r % 6], r / 6 == 1 ? 1.0 : 0.0, static_cast<uint64_t>(40 + r % 6)});
  return reqs;
}

// The completion's tokens and their log-probabilities (bitwise equal logits
// give equal JSON), or "error: ..." naming what went wrong.
std::string Complete(int port, const Request& q) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  nlohmann::json body = {{"model", "demo"},          {"prompt", q.prompt},
                         {"max_tokens", kMaxTokens}, {"temperature", q.temperature},
                         {"seed", q.seed},          {"logprobs", 1}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  if (!res) return "error: no response (" + httplib::to_string(res.error()) + ")";
  if (res->status != 200) return "error: HTTP " + std::to_string(res->status) + " " + res->body;
  return nlohmann::json::parse(res->body)["choices"][0]["logprobs"].dump();
}

struct Texts {
  std::vector<std::string> alone, together;
};

// Every request alone (one after another), then all 16 at once.
Texts Collect(int port) {
  const std::vector<Request> reqs = Requests();
  Texts t;
  for (const Request& q : reqs) t.alone.push_back(Complete(port, q));
  std::vector<std::future<std::string>> futures;
  for (const Request& q : reqs)
    futures.push_back(std::async(std::launch::async, [port, q] { return Complete(port, q); }));
  for (auto& f : futures) t.together.push_back(f.get());
  return t;
}

struct Case {
  const char* name;
  const char* dtype;  // "bf16": the demo folder itself; else a GGUF of it
  int tp;
};

class BatchInvarianceServeTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const char* dt : {"q8_0", "q4_0"}) {
      // A folder holding the GGUF and the demo's tokenizer files.
      fs::create_directories(GgufDir(dt));
      for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        fs::copy_file(Demo() + "/" + f, GgufDir(dt) + "/" + f);
      int st = 0;
      const std::string out = RunCommand(SpecdBinary() + " quantize --model " + Demo() +
                                             " --out " + Gguf(dt) + " --dtype " + dt + " 2>&1",
                                         &st);
      ASSERT_EQ(st, 0) << out;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Demo() { return std::string(SPECD_SOURCE_DIR) + "/models/demo"; }
  static std::string GgufDir(const std::string& dtype) { return dir_->path() + "/demo-" + dtype; }
  static std::string Gguf(const std::string& dtype) { return GgufDir(dtype) + "/model.gguf"; }

  enum class Spec { kNone, kTree, kAuto };

  // Serves the case's model (with the demo's EAGLE-3 head unless kNone) and
  // collects its texts. Each server measures its own step costs (a fresh
  // cache directory), so auto shapes differ from run to run.
  Texts Serve(const Case& c, Spec spec, const kernels::KernelPathCase& path) {
    std::string tag = std::string(c.name) + "-" + std::to_string(static_cast<int>(spec)) + "-" +
                      path.name;
    std::replace(tag.begin(), tag.end(), '+', '_');
    const std::string model = std::string(c.dtype) == "bf16" ? Demo() : GgufDir(c.dtype);
    std::vector<std::string> args = {"serve",   "--model",   model, "--port", "0",
                                     "--served-model-name", "demo", "--threads", "1",
                                     "--tp",    std::to_string(c.tp)};
    if (std::string(c.dtype) == "bf16") args.push_back("--deterministic");
    if (spec != Spec::kNone)
      args.insert(args.end(),
                  {"--speculative-algorithm", "EAGLE3", "--draft-model", Demo() + "/eagle3"});
    // A fixed tree (two candidates per level, depth 3): every step verifies
    // several tokens, which auto shapes might not do on this small model.
    if (spec == Spec::kTree)
      args.insert(args.end(), {"--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
                               "--speculative-num-draft-tokens", "6"});
    const std::string cache = dir_->path() + "/cache-" + tag;
    fs::create_directories(cache);
    ServeProcess server(dir_->path() + "/" + tag + ".log");
    std::string why;
    Texts t;
    const std::vector<std::string> env = {
        "XDG_CACHE_HOME=" + cache,
        std::string("SPECD_KERNEL_ISA=") + QuantDotIsaName(path.paths.quant_dot),
        std::string("SPECD_AMX=") + (path.paths.amx_int8 ? "1" : "0")};
    if (!server.Start(args, env, &why)) {
      ADD_FAILURE() << why;
      return t;
    }
    t = Collect(server.port());
    server.Signal(SIGTERM);
    EXPECT_EQ(server.Wait(30), 0) << server.log();
    return t;
  }

  void CheckOnePath(const Case& c, const kernels::KernelPathCase& path);

  static TempDir* dir_;
};

TempDir* BatchInvarianceServeTest::dir_ = nullptr;

// Three servers: plain, EAGLE-3 with a fixed tree, EAGLE-3 with auto shapes.
TEST_P(BatchInvarianceServeTest, ConcurrentEqualsAloneAndSpeculativeEqualsPlain) {
  for (const kernels::KernelPathCase& path : kernels::KernelPathCasesOfThisCpu()) {
    SCOPED_TRACE("path " + path.name);
    CheckOnePath(GetParam(), path);
    if (HasFatalFailure()) return;
  }
}

void BatchInvarianceServeTest::CheckOnePath(const Case& c, const kernels::KernelPathCase& path) {
  const Texts plain = Serve(c, Spec::kNone, path);
  const Texts spec = Serve(c, Spec::kTree, path);
  const Texts spec_auto = Serve(c, Spec::kAuto, path);
  ASSERT_EQ(plain.alone.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(spec.alone.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(spec_auto.alone.size(), static_cast<size_t>(kRequests));
  const std::vector<Request> reqs = Requests();
  for (int r = 0; r < kRequests; ++r) {
    const std::string what = "request " + std::to_string(r) + " (prompt " +
                             std::to_string(r % 6) + ", temperature " +
                             std::to_string(reqs[r].temperature) + ")";
    ASSERT_EQ(plain.alone[r].rfind("error", 0), std::string::npos) << what << ": " << plain.alone[r];
    EXPECT_FALSE(plain.alone[r].empty()) << what;
    EXPECT_EQ(plain.together[r], plain.alone[r]) << what << ", plain server";
    EXPECT_EQ(spec.together[r], spec.alone[r]) << what << ", EAGLE-3 server";
    EXPECT_EQ(spec.alone[r], plain.alone[r]) << what << ": speculative vs plain";
    EXPECT_EQ(spec_auto.together[r], plain.alone[r]) << what << ", EAGLE-3 auto server";
    // Identical requests (same prompt and parameters) got the same text while
    // running side by side.
    if (r >= 12) {
      EXPECT_EQ(plain.together[r], plain.together[r - 12]) << what;
    }
  }
  // The seeded requests did sample: not every one equals its greedy twin.
  int differ = 0;
  for (int r = 6; r < 12; ++r) differ += plain.alone[r] != plain.alone[r - 6];
  EXPECT_GT(differ, 0) << "seeded temperature-1 completions all equal the greedy ones";
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvarianceServeTest,
                         ::testing::Values(Case{"Bf16Tp1", "bf16", 1}, Case{"Bf16Tp2", "bf16", 2},
                                           Case{"Q8_0Tp1", "q8_0", 1}, Case{"Q4_0Tp1", "q4_0", 1}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace specd
