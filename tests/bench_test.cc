// specd bench, generate --profile / --verify-cost and --quantize through the
// binary and in process, on the "tiny" fixture.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "loader/checkpoint.h"
#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "test_util.h"

namespace specd {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::SpecdBinary;

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FixtureOptions fo;
    fo.preset = "tiny";
    fo.out = model_ = dir_.path() + "/tiny";
    fo.seed = 7;
    ASSERT_TRUE(MakeFixture(fo).ok());
  }
  std::string Bench(const std::string& args, int* status) {
    return RunCommand(SpecdBinary() + " bench --model " + model_ +
                          " --repeats 2 --prompts 2 --prompt-len 8 --max-tokens 6 " + args +
                          " 2>" + dir_.path() + "/err.txt",
                      status);
  }
  std::string Err() { return RunCommand("cat " + dir_.path() + "/err.txt"); }

  testing::TempDir dir_;
  std::string model_;
};

TEST_F(BenchCliTest, JsonHasOneEntryPerConfigurationWithRatios) {
  int status = -1;
  std::string out = Bench(
      "--compare '' '--threads 1' '--speculative-algorithm NGRAM' --profile --verify-cost 1,4 "
      "--json",
      &status);
  ASSERT_EQ(status, 0) << Err();
  json j = json::parse(out);
  ASSERT_EQ(j["configs"].size(), 3u);
  EXPECT_EQ(j["workload"]["repeats"], 2);
  EXPECT_EQ(j["workload"]["prompt_len"], 8);
  EXPECT_TRUE(j["load_avg"].contains("start"));
  const char* labels[] = {"A", "B", "C"};
  for (size_t i = 0; i < 3; ++i) {
    const json& c = j["configs"][i];
    SCOPED_TRACE(c.dump());
    EXPECT_EQ(c["label"], labels[i]);
    // 2 rounds x 2 prompts, interleaved: one decode tok/s value per round.
    EXPECT_EQ(c["runs"].size(), 4u);
    EXPECT_EQ(c["decode_tok_s"]["rounds"].size(), 2u);
    const json& d = c["decode_tok_s"];
    EXPECT_GT(d["median"].get<double>(), 0);
    EXPECT_LE(d["min"].get<double>(), d["median"].get<double>());
    EXPECT_GE(d["max"].get<double>(), d["median"].get<double>());
    EXPECT_GT(c["ttft_ms"]["median"].get<double>(), 0);
    for (const json& r : c["runs"]) EXPECT_EQ(r["n_generated"], 6);
    EXPECT_FALSE(c["ratio"]["ci_low"].is_null());
    EXPECT_LE(c["ratio"]["ci_low"].get<double>(), c["ratio"]["ratio"].get<double>());
    EXPECT_GE(c["ratio"]["ci_high"].get<double>(), c["ratio"]["ratio"].get<double>());
    ASSERT_TRUE(c["profile"].is_object());
    EXPECT_TRUE(c["profile"]["ops"].contains("matmul qkv"));
    EXPECT_TRUE(c["profile"]["ops"].contains("lm_head"));
    ASSERT_EQ(c["forward_cost"].size(), 2u);
    EXPECT_EQ(c["forward_cost"][1]["n"], 4);
  }
  // The baseline's ratio to itself is exactly 1.
  EXPECT_DOUBLE_EQ(j["configs"][0]["ratio"]["ratio"].get<double>(), 1.0);
  EXPECT_TRUE(j["configs"][0]["accept_length_mean"].is_null());
  EXPECT_GE(j["configs"][2]["accept_length_mean"].get<double>(), 1.0);
  EXPECT_EQ(j["configs"][1]["runs"][0]["threads"], 1);
}

TEST_F(BenchCliTest, TablePrintsEveryConfiguration) {
  int status = -1;
  std::string out = Bench("--repeats 1 --compare '' --mmap", &status);
  // "--mmap" right after --compare is a second configuration string.
  ASSERT_EQ(status, 0) << Err();
  EXPECT_NE(out.find("| cfg | flags | decode tok/s median [min, max] |"), std::string::npos) << out;
  EXPECT_NE(out.find("| A | (default) |"), std::string::npos) << out;
  EXPECT_NE(out.find("| B | --mmap |"), std::string::npos) << out;
  EXPECT_NE(out.find("ratio vs A"), std::string::npos) << out;
}

TEST_F(BenchCliTest, BadConfigurationFailsBeforeAnyRun) {
  int status = -1;
  Bench("--compare '' '--threads 2 --no-such-flag'", &status);
  EXPECT_EQ(status, 2);
  std::string err = Err();
  EXPECT_NE(err.find("configuration B \"--threads 2 --no-such-flag\""), std::string::npos) << err;
  EXPECT_NE(err.find("--no-such-flag"), std::string::npos) << err;
  EXPECT_EQ(err.find("[warm-up]"), std::string::npos) << "ran before checking: " << err;

  Bench("--compare '--threads x'", &status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(Err().find("configuration A"), std::string::npos) << Err();

  Bench("--compare '--max-tokens 3'", &status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(Err().find("set by specd bench"), std::string::npos) << Err();
}

TEST_F(BenchCliTest, GenerateProfilePrintsOpTable) {
  int status = -1;
  std::string out = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                   " --prompt-ids 1,2,3 --max-tokens 5 --profile 2>&1",
                               &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("profile (prefill): 1 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("profile (decode): 4 steps"), std::string::npos) << out;
  for (const char* op : {"matmul qkv", "matmul o", "matmul gate/up", "matmul down", "lm_head",
                         "attention", "rmsnorm", "rope", "allreduce+norm", "sampling"})
    EXPECT_NE(out.find(op), std::string::npos) << op << "\n" << out;
}

TEST_F(BenchCliTest, VerifyCostWithProfileHasATablePerSize) {
  int status = -1;
  std::string out = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                   " --prompt-ids 1,2,3 --max-tokens 2 --profile --verify-cost 1,3"
                                   " --verify-iters 2 --json 2>/dev/null",
                               &status);
  ASSERT_EQ(status, 0) << out;
  json j = json::parse(out);
  // The generation's own profile is kept apart from the forward-cost runs.
  EXPECT_EQ(j["profile"]["decode"]["steps"], 1);
  ASSERT_EQ(j["forward_cost"].size(), 2u);
  for (const json& c : j["forward_cost"]) {
    SCOPED_TRACE(c.dump());
    // --verify-iters timed runs (the warm-up run is neither timed nor profiled).
    EXPECT_EQ(c["profile"]["steps"], 2);
    EXPECT_EQ(c["profile"]["ops"]["lm_head"]["calls"], 2);
    EXPECT_GT(c["profile"]["ops"]["matmul gate/up"]["ms"].get<double>(), 0);
  }
  std::string text = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                    " --prompt-ids 1,2,3 --max-tokens 2 --profile --verify-cost 4"
                                    " --verify-iters 1 2>&1 >/dev/null",
                                &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("profile (forward n=4): 1 steps"), std::string::npos) << text;
}

// --baseline: short runs alternate plain and speculative (a few pairs within
// about a second) and the speedup is the geometric mean of the pairs'
// ratios, inside its interval; the text is still speculative greedy = plain.
TEST_F(BenchCliTest, GenerateBaselineAlternatesShortRuns) {
  int status = -1;
  const std::string common = SpecdBinary() + " generate --model " + model_ +
                             " --prompt-ids 1,2,3,1,2,3 --max-tokens 8 --ignore-eos --json ";
  const json spec = json::parse(
      RunCommand(common + "--speculative-algorithm NGRAM --baseline 2>/dev/null", &status));
  ASSERT_EQ(status, 0);
  const json plain = json::parse(RunCommand(common + "2>/dev/null", &status));
  ASSERT_EQ(status, 0);
  EXPECT_EQ(spec["token_ids"], plain["token_ids"]);
  const json& st = spec["stats"];
  const int rounds = st["baseline_rounds"].get<int>();
  EXPECT_GE(rounds, 2) << "a run of 8 tokens on the tiny model takes well under 0.2 s";
  EXPECT_LE(rounds, 5);
  EXPECT_GT(st["baseline_decode_tok_s"].get<double>(), 0);
  EXPECT_GT(st["speculative_decode_tok_s"].get<double>(), 0);
  const double s = st["speedup"].get<double>();
  ASSERT_TRUE(st.contains("speedup_interval")) << st.dump();
  EXPECT_LE(st["speedup_interval"][0].get<double>(), s * (1 + 1e-12));
  EXPECT_GE(st["speedup_interval"][1].get<double>(), s * (1 - 1e-12));
  // Without --baseline there is nothing to compare.
  EXPECT_FALSE(json::parse(RunCommand(common + "--speculative-algorithm NGRAM 2>/dev/null",
                                      &status))["stats"]
                   .contains("speedup"));
}

TEST_F(BenchCliTest, ThreadingFlagsGiveTheSameGreedyTokens) {
  auto tokens = [&](const std::string& flags) {
    int status = -1;
    std::string out = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                     " --prompt-ids 1,2,3 --max-tokens 8 --json " + flags +
                                     " 2>/dev/null",
                                 &status);
    EXPECT_EQ(status, 0) << flags << ": " << out;
    return status == 0 ? json::parse(out)["token_ids"] : json();
  };
  const json base = tokens("--threads 1");
  EXPECT_EQ(base.size(), 8u);
  EXPECT_EQ(tokens("--threads 2 --matmul-split static --pool-spin-us 0"), base);
  EXPECT_EQ(tokens("--threads 3 --matmul-split dynamic --pool-spin-us 200"), base);
  EXPECT_EQ(tokens("--threads 2 --no-prefetch"), base);
  // Every decode layout computes the same sums (float weights: bitwise).
  EXPECT_EQ(tokens("--no-stream-decode"), base);
  EXPECT_EQ(tokens("--stream-prefetch on"), base);
  EXPECT_EQ(tokens("--stream-prefetch off"), base);
  int status = -1;
  // stats records the decode layout and the prefetch distance that ran.
  const json on = json::parse(RunCommand(SpecdBinary() + " generate --model " + model_ +
                                             " --prompt-ids 1 --max-tokens 1 --json "
                                             "--stream-prefetch on 2>/dev/null",
                                         &status));
  EXPECT_EQ(on["stats"]["stream_decode"], true);
  EXPECT_EQ(on["stats"]["stream_prefetch"], 1024);
  const json off = json::parse(RunCommand(SpecdBinary() + " generate --model " + model_ +
                                              " --prompt-ids 1 --max-tokens 1 --json "
                                              "--no-stream-decode 2>/dev/null",
                                          &status));
  EXPECT_EQ(off["stats"]["stream_decode"], false);
  std::string bad = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                   " --prompt-ids 1 --stream-prefetch sometimes 2>&1",
                               &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(bad.find("--stream-prefetch"), std::string::npos) << bad;
  std::string err = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                   " --prompt-ids 1 --matmul-split sideways 2>&1",
                               &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(err.find("--matmul-split"), std::string::npos) << err;
}

// Weights that stay in the last-level cache skip the start-up read probe
// (a buffer of up to 256 MiB faulted in) and stream without software prefetch.
TEST_F(BenchCliTest, CachedWeightsSkipTheReadProbe) {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 < (4L << 20)) GTEST_SKIP() << "this machine reports no L3 of at least 4 MiB (" << l3 << ")";
  int status = -1;
  const std::string log = RunCommand(SpecdBinary() + " generate --model " + model_ +
                                         " --prompt-ids 1 --max-tokens 1 --json 2>&1 >/dev/null",
                                     &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("no read probe"), std::string::npos) << log;
  EXPECT_EQ(log.find("sequential read"), std::string::npos) << log;
  const json j = json::parse(RunCommand(SpecdBinary() + " generate --model " + model_ +
                                            " --prompt-ids 1 --max-tokens 1 --json 2>/dev/null",
                                        &status));
  EXPECT_EQ(j["stats"]["stream_prefetch"], 0);
}

// --quantize q8_0 on the safetensors folder decodes the same greedy tokens as
// the GGUF `specd quantize --dtype q8_0` writes, and its logits agree.
TEST_F(BenchCliTest, QuantizeOnLoadMatchesQuantizedGguf) {
  for (const char* dt : {"q8_0", "q4_0"}) {
    SCOPED_TRACE(dt);
    const std::string gguf = dir_.path() + "/tiny-" + dt + ".gguf";
    int status = -1;
    std::string q = RunCommand(SpecdBinary() + " quantize --model " + model_ + " --out " + gguf +
                                   " --dtype " + dt + " 2>&1",
                               &status);
    ASSERT_EQ(status, 0) << q;
    auto gen = [&](const std::string& args) {
      std::string out = RunCommand(SpecdBinary() + " generate --json --prompt-ids 5,6,7,8 "
                                                   "--max-tokens 24 --ignore-eos " +
                                       args + " 2>/dev/null",
                                   &status);
      EXPECT_EQ(status, 0) << args;
      return json::parse(out)["token_ids"].get<std::vector<int>>();
    };
    std::vector<int> onload = gen("--model " + model_ + " --quantize " + std::string(dt));
    std::vector<int> from_gguf = gen("--model " + gguf);
    std::vector<int> f32 = gen("--model " + model_);
    EXPECT_EQ(onload, from_gguf);
    EXPECT_EQ(onload.size(), 24u);
    (void)f32;

    // Logits of one forward, in process.
    auto comm = NewLocalCommunicator();
    auto logits = [&](const std::string& path, bool quantize) {
      RunnerOptions ro;
      ro.model_path = path;
      ro.threads = 1;
      if (quantize) ro.load.quantize = std::string(dt) == "q8_0" ? DType::kQ8_0 : DType::kQ4_0;
      auto r = ModelRunner::Create(ro, comm.get());
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      Engine e(r->get());
      SeqInput in;
      in.seq = e.NewSequence();
      in.tokens = {5, 6, 7, 8, 9, 10};
      in.all_logits = true;
      ForwardOutput out;
      EXPECT_TRUE(e.Forward({in}, false, &out).ok());
      return out.logits;
    };
    std::vector<float> a = logits(model_, true), b = logits(gguf, false);
    ASSERT_EQ(a.size(), b.size());
    double maxdiff = 0, maxabs = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(a[i] - b[i])));
      maxabs = std::max(maxabs, static_cast<double>(std::fabs(b[i])));
    }
    std::printf("%s: logits maxdiff %.3g (max |logit| %.3g)\n", dt, maxdiff, maxabs);
    // Same quantized weights; only RoPE pairing (interleaved vs half) and
    // summation order differ.
    EXPECT_LT(maxdiff, 1e-4 * std::max(1.0, maxabs));
  }
}

}  // namespace
}  // namespace specd
