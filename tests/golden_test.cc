// Greedy decoding and first-step logits against goldens produced by llama2.c's
// reference run.c (an independent implementation), for two tiny trained
// models in safetensors and GGUF form (see shared/data/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "comm/communicator.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "test_util.h"

namespace specd {
namespace {

struct GoldenCase {
  std::string model;  // folder under shared/data/models
  std::string file;   // "" for the safetensors folder, else the .gguf name
};

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenTest, GreedyIdsAndFirstLogitsMatchReference) {
  SKIP_WITHOUT_SHARED_DATA();
  const GoldenCase& gc = GetParam();
  std::string dir = testing::SharedData() + "/models/" + gc.model;
  auto golden_text = ReadFileToString(dir + "/golden.json");
  ASSERT_TRUE(golden_text.ok()) << golden_text.status().ToString();
  nlohmann::json golden = nlohmann::json::parse(*golden_text);

  auto comm = NewLocalCommunicator();
  RunnerOptions ro;
  ro.model_path = gc.file.empty() ? dir : dir + "/" + gc.file;
  ro.threads = 2;
  auto runner = ModelRunner::Create(ro, comm.get());
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  Engine engine(runner->get());

  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<int32_t> prompt = c["prompt_ids"];
    std::vector<int32_t> want = c["generated_ids"];
    std::vector<float> want_logits = c["first_logits"];

    // First-step logits: prefill the prompt and compare every logit.
    int seq = engine.NewSequence();
    SeqInput in;
    in.seq = seq;
    in.tokens = prompt;
    ForwardOutput out;
    ASSERT_TRUE(engine.Forward({in}, false, &out).ok());
    ASSERT_EQ(out.logits.size(), want_logits.size());
    double maxdiff = 0;
    for (size_t i = 0; i < want_logits.size(); ++i)
      maxdiff = std::max(maxdiff, std::fabs(double(out.logits[i]) - want_logits[i]));
    EXPECT_LT(maxdiff, 1e-4) << "max |logit - reference|";
    engine.FreeSequence(seq);

    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = static_cast<int>(want.size());
    GenerateResult res;
    ASSERT_TRUE(Generate(engine, req, [](int32_t) { return true; }, &res).ok());
    EXPECT_EQ(res.tokens, want);
    EXPECT_EQ(engine.kv().used_pages(), 0) << "KV pages leaked";
  }
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, GoldenTest,
    ::testing::Values(GoldenCase{"stories260K", ""}, GoldenCase{"stories260K", "model-f32.gguf"},
                      GoldenCase{"aidreams260K", ""},
                      GoldenCase{"aidreams260K", "model-f32.gguf"}),
    [](const auto& info) {
      return info.param.model + (info.param.file.empty() ? "_safetensors" : "_gguf");
    });

}  // namespace
}  // namespace specd
