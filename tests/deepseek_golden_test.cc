// DeepseekGoldenTest: specd's DeepSeek-V2/V3 family (Kimi-K2, Kimi-K2.5,
// Moonlight, DeepSeek-V2-Lite) against Hugging Face transformers.
//
// The goldens (tests/python/deepseek/goldens/P.json) come from
// tests/python/deepseek/make_goldens.py: transformers' greedy generate() on
// the random-weight fixture `specd make-model --preset P --dtype f32 --seed S`.
// Each test regenerates the fixture with MakeFixture, checks that its bytes
// are the ones the golden was made from (sha256), then runs specd's engine
// on it: the greedy ids must match exactly, and the first decode step's
// top-5 logits within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "comm/communicator.h"
#include "modelgen/fixture.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "sha256.h"
#include "test_util.h"

namespace specd {
namespace {

constexpr const char* kRegenerate = "rerun tests/python/deepseek/make_goldens.py";

nlohmann::json ReadGolden(const std::string& preset) {
  const std::string path =
      std::string(SPECD_SOURCE_DIR) + "/tests/python/deepseek/goldens/" + preset + ".json";
  auto text = ReadFileToString(path);
  // Committed beside the script: missing is a broken checkout, never a skip.
  EXPECT_TRUE(text.ok()) << path << ": " << text.status().ToString() << " (" << kRegenerate << ")";
  if (!text.ok()) return nullptr;
  return nlohmann::json::parse(*text);
}

// Writes the golden's fixture into `dir`.
Status MakeGoldenFixture(const nlohmann::json& golden, const std::string& dir) {
  FixtureOptions o;
  o.preset = golden["preset"];
  o.seed = golden["seed"];
  auto dtype = ParseDType(golden["dtype"].get<std::string>());
  if (!dtype.ok()) return dtype.status();
  o.dtype = *dtype;
  o.out = dir;
  return MakeFixture(o);
}

class DeepseekGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekGoldenTest, FixtureBytesMatchGolden) {
  const nlohmann::json golden = ReadGolden(GetParam());
  ASSERT_FALSE(golden.is_null());
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/model";
  ASSERT_TRUE(MakeGoldenFixture(golden, dir).ok());
  for (const char* file : {"model.safetensors", "config.json"}) {
    auto bytes = ReadFileToString(dir + "/" + file);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(testing::Sha256Hex(*bytes), golden["sha256"][file].get<std::string>())
        << "fixture changed: " << kRegenerate << " (" << GetParam() << " " << file << ")";
  }
}

TEST_P(DeepseekGoldenTest, GreedyIdsMatchTransformers) {
  const nlohmann::json golden = ReadGolden(GetParam());
  ASSERT_FALSE(golden.is_null());
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/model";
  ASSERT_TRUE(MakeGoldenFixture(golden, dir).ok());

  auto comm = NewLocalCommunicator();
  RunnerOptions ro;
  ro.model_path = dir;
  ro.threads = 2;
  auto runner = ModelRunner::Create(ro, comm.get());
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  Engine engine(runner->get());

  for (const auto& c : golden["cases"]) {
    const std::vector<int32_t> prompt = c["prompt_ids"];
    const std::vector<int32_t> want = c["generated_ids"];
    SCOPED_TRACE(::testing::Message() << "prompt of " << prompt.size() << " tokens");

    // First decode step: the logits after prefilling the prompt.
    int seq = engine.NewSequence();
    SeqInput in;
    in.seq = seq;
    in.tokens = prompt;
    ForwardOutput out;
    ASSERT_TRUE(engine.Forward({in}, false, &out).ok());
    const std::vector<int> top_ids = c["first_step_top5"]["ids"];
    const std::vector<double> top_logits = c["first_step_top5"]["logits"];
    ASSERT_EQ(out.logits.size(), static_cast<size_t>(runner->get()->config().vocab_size));
    double maxdiff = 0;
    for (size_t i = 0; i < top_ids.size(); ++i) {
      maxdiff = std::max(maxdiff, std::fabs(double(out.logits[top_ids[i]]) - top_logits[i]));
    }
    EXPECT_LT(maxdiff, 1e-4) << "max |logit - transformers| over the reference's top 5";
    engine.FreeSequence(seq);

    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = static_cast<int>(want.size());
    GenerateResult res;
    ASSERT_TRUE(Generate(
                    engine, req, [](int32_t) { return true; }, &res)
                    .ok());
    EXPECT_EQ(res.tokens, want) << "greedy ids differ from transformers'";
    EXPECT_EQ(engine.kv().used_pages(), 0) << "KV pages leaked";
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, DeepseekGoldenTest,
                         ::testing::Values("deepseek-v3-tiny", "kimi-k2-tiny", "kimi-k25-tiny",
                                           "moonlight-tiny", "deepseek-v2-lite-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The digest the fixture check relies on, against FIPS 180-4's examples.
TEST(DeepseekGoldenSha256Test, KnownVectors) {
  EXPECT_EQ(testing::Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(testing::Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(testing::Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(testing::Sha256Hex(std::string(1000, 'a')),  // 16 blocks, as hashlib gives
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace specd
