// CompressedTensorsGoldenTest: `specd quantize --format compressed-tensors`
// against compressed-tensors 0.20.1 itself, and specd's engine on the INT4
// result against transformers.
//
// The goldens (tests/python/compressed_tensors/goldens/P.json) come from
// tests/python/compressed_tensors/make_goldens.py: the library's compress path
// on the fixture `specd make-model --preset P --dtype bf16 --seed S` (per
// tensor sha256 and quantization_config), and transformers' greedy ids on the
// library's dequantized weights. Each test regenerates the fixture with the
// same seed and checks its bytes first, so a changed fixture reads as such.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "comm/communicator.h"
#include "loader/checkpoint.h"
#include "loader/safetensors_reader.h"
#include "modelgen/compressed_tensors_writer.h"
#include "modelgen/fixture.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "sha256.h"
#include "test_util.h"

namespace specd {
namespace {

using json = nlohmann::json;

constexpr const char* kRegenerate = "rerun tests/python/compressed_tensors/make_goldens.py";

json ReadGolden(const std::string& preset) {
  const std::string path = std::string(SPECD_SOURCE_DIR) +
                           "/tests/python/compressed_tensors/goldens/" + preset + ".json";
  auto text = ReadFileToString(path);
  // Committed beside the script: missing is a broken checkout, never a skip.
  EXPECT_TRUE(text.ok()) << path << ": " << text.status().ToString() << " (" << kRegenerate << ")";
  return text.ok() ? json::parse(*text) : json();
}

// `specd make-model` of the golden's fixture into `dir`, checked against the
// bytes the golden was made from.
void MakeFixtureCli(const json& golden, const std::string& dir) {
  int status = 0;
  const std::string out = testing::RunCommand(
      testing::SpecdBinary() + " make-model --preset " + golden["preset"].get<std::string>() +
          " --dtype " + golden["dtype"].get<std::string>() + " --seed " +
          std::to_string(golden["seed"].get<uint64_t>()) + " --out " + dir + " 2>&1",
      &status);
  ASSERT_EQ(status, 0) << out;
  for (const char* file : {"model.safetensors", "config.json"}) {
    auto bytes = ReadFileToString(dir + "/" + file);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    ASSERT_EQ(testing::Sha256Hex(*bytes), golden["source_sha256"][file].get<std::string>())
        << "fixture changed: " << kRegenerate << " (" << file << ")";
  }
}

class CompressedTensorsGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CompressedTensorsGoldenTest, EveryTensorIsByteIdenticalToTheLibrarys) {
  const json golden = ReadGolden(GetParam());
  ASSERT_TRUE(golden.is_object());
  // The script quantized with specd's default ignore list.
  ASSERT_EQ(golden["ignore"], json(DefaultCompressedTensorsIgnore())) << kRegenerate;
  testing::TempDir tmp;
  const std::string model = tmp.path() + "/model", out = tmp.path() + "/int4";
  MakeFixtureCli(golden, model);
  int status = 0;
  const std::string log = testing::RunCommand(testing::SpecdBinary() +
                                                  " quantize --format compressed-tensors --model " +
                                                  model + " --out " + out + " 2>&1",
                                              &status);
  ASSERT_EQ(status, 0) << log;

  auto bytes = ReadFileToString(out + "/model.safetensors");
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto views = ParseSafetensors(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(),
                                out + "/model.safetensors");
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  const json& want = golden["tensors"];
  EXPECT_EQ(views->size(), want.size());
  int n_packed = 0;
  for (const TensorView& t : *views) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(want.contains(t.name)) << "not in the library's output";
    EXPECT_EQ(SafetensorsDTypeName(t.dtype), want[t.name]["dtype"].get<std::string>());
    EXPECT_EQ(t.shape, want[t.name]["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(testing::Sha256Hex(std::string_view(static_cast<const char*>(t.data), t.nbytes)),
              want[t.name]["sha256"].get<std::string>());
    n_packed += t.name.ends_with(".weight_packed");
  }
  EXPECT_EQ(n_packed, golden["n_quantized"].get<int>());
  auto config = ReadFileToString(out + "/config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(json::parse(*config)["quantization_config"], golden["quantization_config"]);
}

INSTANTIATE_TEST_SUITE_P(Presets, CompressedTensorsGoldenTest,
                         ::testing::Values("deepseek-v3-tiny", "kimi-k25-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// DeepSeek-V3 (Kimi-K2's architecture) with INT4 routed experts. (Kimi-K2.5
// has no transformers class; its golden covers the quantized bytes.)
TEST(CompressedTensorsGreedyTest, IdsMatchTransformersOnTheLibrarysDequantizedWeights) {
  const json golden = ReadGolden("deepseek-v3-tiny");
  ASSERT_TRUE(golden.is_object());
  ASSERT_TRUE(golden.contains("greedy")) << kRegenerate;
  testing::TempDir tmp;
  const std::string model = tmp.path() + "/model", out = tmp.path() + "/int4";
  MakeFixtureCli(golden, model);
  ASSERT_TRUE(WriteCompressedTensorsModel(model, out, {}, nullptr).ok());

  auto comm = NewLocalCommunicator();
  RunnerOptions ro;
  ro.model_path = out;
  ro.threads = 2;
  auto runner = ModelRunner::Create(ro, comm.get());
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  int n_int4 = 0;
  for (const auto& [name, t] : (*runner)->checkpoint().tensors()) n_int4 += t.dtype == DType::kQ4_BF16;
  EXPECT_EQ(n_int4, golden["n_quantized"].get<int>());
  Engine engine(runner->get());
  for (const auto& c : golden["greedy"]["cases"]) {
    const std::vector<int32_t> prompt = c["prompt_ids"];
    const std::vector<int32_t> want = c["generated_ids"];
    SCOPED_TRACE(::testing::Message() << "prompt of " << prompt.size() << " tokens");
    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = static_cast<int>(want.size());
    GenerateResult res;
    ASSERT_TRUE(Generate(engine, req, [](int32_t) { return true; }, &res).ok());
    EXPECT_EQ(res.tokens, want) << "greedy ids differ from transformers' on the library's "
                                   "dequantized weights";
    EXPECT_EQ(engine.kv().used_pages(), 0) << "KV pages leaked";
  }
}

// Kimi-K2.5's INT4 folder: the vision tower stays as it was in the file and
// is skipped at load; the language model's names lose their prefix.
TEST(CompressedTensorsKimiK25Test, LoadsTheLanguageModelOnly) {
  const json golden = ReadGolden("kimi-k25-tiny");
  ASSERT_TRUE(golden.is_object());
  testing::TempDir tmp;
  const std::string model = tmp.path() + "/model", out = tmp.path() + "/int4";
  MakeFixtureCli(golden, model);
  ASSERT_TRUE(WriteCompressedTensorsModel(model, out, {}, nullptr).ok());
  auto ck = OpenCheckpoint(out);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->config().tensor_prefix, "");
  int n_int4 = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    EXPECT_EQ(name.rfind("language_model.", 0), std::string::npos) << name;
    EXPECT_EQ(name.find("vision_tower"), std::string::npos) << name;
    n_int4 += t.dtype == DType::kQ4_BF16;
  }
  EXPECT_EQ(n_int4, golden["n_quantized"].get<int>());
  EXPECT_EQ((*ck)->tensors().at("model.layers.1.mlp.experts.0.gate_proj.weight").dtype,
            DType::kQ4_BF16);
  for (const auto& [name, t] : golden["tensors"].items()) {
    if (name.rfind("vision_tower.", 0) == 0 || name.rfind("mm_projector.", 0) == 0) {
      EXPECT_EQ(name.find(".weight_packed"), std::string::npos) << name << " was quantized";
    }
  }
}

}  // namespace
}  // namespace specd
