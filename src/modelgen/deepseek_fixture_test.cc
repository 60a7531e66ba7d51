// The DeepSeek-V2/V3 family fixtures: tensor lists against the names and
// shapes of transformers' modeling_deepseek_v3.py / modeling_deepseek_v2.py
// (written out here by hand), the config.json keys transformers reads, the
// router weight statistics, and Kimi-K2.5's wrapper holding Kimi-K2's values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/safetensors_reader.h"
#include "loader/test_util.h"
#include "loader/weight_names.h"
#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"

namespace specd {
namespace {

using testing_util::RowOf;
using testing_util::TempDir;
using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes ShapesOf(const ModelConfig& c) {
  Shapes out;
  for (const TensorSpec& s : ExpectedTensors(c)) {
    EXPECT_TRUE(out.emplace(s.name, s.shape).second) << "duplicate " << s.name;
  }
  return out;
}

// Tensors of model.layers.L whose name starts with `prefix` (after the layer).
Shapes LayerTensors(const Shapes& all, int layer, const std::string& prefix = "") {
  const std::string p = "model.layers." + std::to_string(layer) + "." + prefix;
  Shapes out;
  for (const auto& [name, shape] : all) {
    if (name.compare(0, p.size(), p) == 0) out.emplace(name.substr(p.size()), shape);
  }
  return out;
}

TEST(DeepseekExpectedTensorsTest, V3TinyHasTheHfNamesAndShapes) {
  auto c = FixturePreset("deepseek-v3-tiny");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Shapes all = ShapesOf(*c);
  // hidden 64, 4 heads, q_lora 32, kv_lora 32, nope 16, rope 8, v 16.
  const Shapes attn = {
      {"input_layernorm.weight", {64}},
      {"self_attn.q_a_proj.weight", {32, 64}},
      {"self_attn.q_a_layernorm.weight", {32}},
      {"self_attn.q_b_proj.weight", {4 * 24, 32}},
      {"self_attn.kv_a_proj_with_mqa.weight", {32 + 8, 64}},
      {"self_attn.kv_a_layernorm.weight", {32}},
      {"self_attn.kv_b_proj.weight", {4 * 32, 32}},
      {"self_attn.o_proj.weight", {64, 4 * 16}},
      {"post_attention_layernorm.weight", {64}},
  };
  Shapes dense = attn;
  dense["mlp.gate_proj.weight"] = {128, 64};
  dense["mlp.up_proj.weight"] = {128, 64};
  dense["mlp.down_proj.weight"] = {64, 128};
  EXPECT_EQ(LayerTensors(all, 0), dense);
  for (int l : {1, 2}) {
    Shapes moe = attn;
    moe["mlp.gate.weight"] = {8, 64};
    moe["mlp.gate.e_score_correction_bias"] = {8};
    for (int e = 0; e < 8; ++e) {
      const std::string p = "mlp.experts." + std::to_string(e) + ".";
      moe[p + "gate_proj.weight"] = {32, 64};
      moe[p + "up_proj.weight"] = {32, 64};
      moe[p + "down_proj.weight"] = {64, 32};
    }
    moe["mlp.shared_experts.gate_proj.weight"] = {32, 64};
    moe["mlp.shared_experts.up_proj.weight"] = {32, 64};
    moe["mlp.shared_experts.down_proj.weight"] = {64, 32};
    EXPECT_EQ(LayerTensors(all, l), moe) << "layer " << l;
  }
  EXPECT_EQ(all.at("model.embed_tokens.weight"), (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(all.at("model.norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(all.at("lm_head.weight"), (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(all.size(), 3u + 12 + 2 * (9 + 2 + 24 + 3));
  // Norms and the correction bias are the 1-D tensors kept f32 by quantizers.
  for (const TensorSpec& s : ExpectedTensors(*c)) EXPECT_EQ(s.is_norm_or_bias, s.shape.size() == 1);
}

TEST(DeepseekExpectedTensorsTest, PlainQProjGreedyRoutingSharedExpertsAndPrefix) {
  // Moonlight: q_lora_rank null -> q_proj; 2 shared experts of 2 * 32.
  auto m = FixturePreset("moonlight-tiny");
  ASSERT_TRUE(m.ok());
  Shapes attn = LayerTensors(ShapesOf(*m), 1, "self_attn.");
  EXPECT_EQ(attn.at("q_proj.weight"), (std::vector<int64_t>{4 * 24, 64}));
  EXPECT_EQ(attn.count("q_a_proj.weight") + attn.count("q_b_proj.weight") +
                attn.count("q_a_layernorm.weight"),
            0u);
  Shapes shared = LayerTensors(ShapesOf(*m), 1, "mlp.shared_experts.");
  EXPECT_EQ(shared.at("gate_proj.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shared.at("down_proj.weight"), (std::vector<int64_t>{64, 64}));

  // DeepSeek-V2 greedy routing: no correction bias.
  auto v2 = FixturePreset("deepseek-v2-lite-tiny");
  ASSERT_TRUE(v2.ok());
  const Shapes v2_all = ShapesOf(*v2);
  EXPECT_EQ(LayerTensors(v2_all, 1, "mlp.gate.").size(), 1u);
  EXPECT_EQ(v2_all.count("model.layers.1.mlp.gate.weight"), 1u);

  // No shared experts; MoE every second layer from layer 1 (moe_layer_freq 2).
  ModelConfig c = *FixturePreset("deepseek-v3-tiny");
  c.n_layers = 4;
  c.moe.n_shared_experts = 0;
  c.moe.layer_freq = 2;
  const Shapes all = ShapesOf(c);
  EXPECT_TRUE(LayerTensors(all, 1, "mlp.shared_experts.").empty());
  EXPECT_EQ(all.count("model.layers.1.mlp.gate_proj.weight"), 1u) << "layer 1 % 2 != 0: dense";
  EXPECT_EQ(all.count("model.layers.2.mlp.gate.weight"), 1u) << "layer 2: MoE";
  EXPECT_EQ(all.count("model.layers.3.mlp.gate_proj.weight"), 1u) << "layer 3: dense";

  // Kimi-K2.5: the same list, every name prefixed.
  auto k2 = FixturePreset("kimi-k2-tiny");
  auto k25 = FixturePreset("kimi-k25-tiny");
  ASSERT_TRUE(k2.ok() && k25.ok());
  const std::vector<TensorSpec> a = ExpectedTensors(*k2), b = ExpectedTensors(*k25);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ("language_model." + a[i].name, b[i].name);
    EXPECT_EQ(a[i].shape, b[i].shape);
  }
}

TEST(DeepseekExpectedTensorsTest, MoonlightBenchHasMoonlightLayerShapes) {
  auto c = FixturePreset("moonlight-bench");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  int64_t params = 0;
  for (const TensorSpec& s : ExpectedTensors(*c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    params += n;
  }
  // embed + head 2 * 163840 * 2048, final norm 2048; per layer attention
  // q_proj 16*192*2048 + kv_a 576*2048 + kv_b 16*256*512 + o 2048*2048 + norms
  // 512 + 2*2048 = 13,767,168; layer 0 dense 3*11264*2048; layers 1-2 MoE:
  // router 64*2048 + bias 64 + 64 experts * 3*1408*2048 + shared 3*2816*2048.
  EXPECT_EQ(params, 671090688 + 3 * 13767168 + 69206016 + 2 * 571080768);
  EXPECT_EQ(c->mla.q_lora_rank, 0);
  EXPECT_EQ(c->moe.n_routed_experts, 64);
}

TEST(DeepseekFixtureTest, RoutersAreWideEnoughToDecide) {
  for (const char* preset : {"deepseek-v3-tiny", "moonlight-bench"}) {
    auto c = FixturePreset(preset);
    ASSERT_TRUE(c.ok());
    const double router_sd = 4.0 / std::sqrt(double(c->hidden_dim));  // 0.5 at hidden 64
    for (const WeightSource& w : RandomWeights(*c, 0)) {
      const bool router = w.name == "model.layers.1.mlp.gate.weight";
      const bool bias = w.name == "model.layers.1.mlp.gate.e_score_correction_bias";
      const bool expert = w.name == "model.layers.1.mlp.experts.3.up_proj.weight";
      if (!router && !bias && !expert) continue;
      const int64_t rows = w.shape.size() == 1 ? 1 : w.shape[0], cols = w.shape.back();
      std::vector<float> row(static_cast<size_t>(cols));
      double sum = 0, sq = 0;
      for (int64_t r = 0; r < rows; ++r) {
        w.rows(r, row.data());
        for (float x : row) {
          sum += x;
          sq += double{x} * x;
        }
      }
      const double n = double(rows) * cols, sd = std::sqrt(sq / n - (sum / n) * (sum / n));
      const double want = router ? router_sd : bias ? 0.05 : 0.02;
      // Few samples for the bias (8 or 64 values): a loose band.
      EXPECT_NEAR(sd, want, want * (bias ? 0.5 : 0.1)) << preset << " " << w.name;
    }
  }
}

TEST(DeepseekFixtureTest, ConfigJsonHasTheKeysTransformersReads) {
  auto c = FixturePreset("deepseek-v3-tiny");
  ASSERT_TRUE(c.ok());
  auto text = HfConfigJson(*c, DType::kBF16);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ(j["model_type"], "deepseek_v3");
  EXPECT_EQ(j["num_nextn_predict_layers"], 0);
  EXPECT_EQ(j["rope_interleave"], true);
  EXPECT_EQ(j["q_lora_rank"], 32);
  EXPECT_EQ(j["rope_scaling"]["type"], "yarn");
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(j["rope_scaling"]["original_max_position_embeddings"], 64);
  EXPECT_EQ(j["routed_scaling_factor"], 2.5);
  EXPECT_EQ(j["torch_dtype"], "bfloat16");

  auto moon = HfConfigJson(*FixturePreset("moonlight-tiny"), DType::kF32);
  ASSERT_TRUE(moon.ok());
  j = nlohmann::json::parse(*moon);
  EXPECT_TRUE(j["q_lora_rank"].is_null());
  EXPECT_TRUE(j["rope_scaling"].is_null());
  EXPECT_EQ(j["routed_scaling_factor"], 2.446) << "shortest decimal, not 2.4460000991821289";

  auto v2 = HfConfigJson(*FixturePreset("deepseek-v2-lite-tiny"), DType::kF32);
  ASSERT_TRUE(v2.ok());
  j = nlohmann::json::parse(*v2);
  EXPECT_EQ(j["architectures"][0], "DeepseekV2ForCausalLM");
  EXPECT_EQ(j["topk_method"], "greedy");
  EXPECT_EQ(j["norm_topk_prob"], false);
  EXPECT_EQ(j["rope_scaling"]["mscale_all_dim"], 0.707);

  auto k25 = HfConfigJson(*FixturePreset("kimi-k25-tiny"), DType::kF32);
  ASSERT_TRUE(k25.ok());
  j = nlohmann::json::parse(*k25);
  EXPECT_EQ(j["architectures"][0], "KimiK25ForConditionalGeneration");
  EXPECT_EQ(j["text_config"]["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ(j["text_config"]["rope_scaling"]["factor"], 32.0);
  EXPECT_EQ(j["text_config"]["rope_scaling"]["beta_fast"], 1.0);
  EXPECT_FALSE(j.contains("hidden_size")) << "the text model's keys live under text_config";
}

// Kimi-K2.5's file holds Kimi-K2's tensors under "language_model." with the
// same bytes, plus vision tensors that no text tensor list names; the loader
// keeps only the former, stripped, so both load as the same checkpoint.
TEST(DeepseekFixtureTest, KimiK25WrapsKimiK2Values) {
  TempDir tmp;
  FixtureOptions o;
  o.seed = 4;
  o.preset = "kimi-k2-tiny";
  o.out = tmp / "k2";
  ASSERT_TRUE(MakeFixture(o).ok());
  o.preset = "kimi-k25-tiny";
  o.out = tmp / "k25";
  ASSERT_TRUE(MakeFixture(o).ok());

  auto file = ReadFileToString(tmp / "k25/model.safetensors");
  ASSERT_TRUE(file.ok());
  auto views = ParseSafetensors(reinterpret_cast<const uint8_t*>(file->data()), file->size(),
                                tmp / "k25/model.safetensors");
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  std::map<std::string, TensorView> raw;
  for (const TensorView& v : *views) raw.emplace(v.name, v);
  auto k2 = OpenCheckpoint(tmp / "k2");
  ASSERT_TRUE(k2.ok()) << k2.status().ToString();
  for (const auto& [name, a] : (*k2)->tensors()) {
    auto it = raw.find("language_model." + name);
    ASSERT_NE(it, raw.end()) << name;
    ASSERT_EQ(it->second.shape, a.shape) << name;
    ASSERT_EQ(it->second.nbytes, a.nbytes) << name;
    EXPECT_EQ(std::memcmp(a.data, it->second.data, a.nbytes), 0) << name;
  }
  for (const TensorSpec& v : KimiK25VisionTensors()) {
    ASSERT_EQ(raw.count(v.name), 1u) << v.name;
    EXPECT_EQ(raw.at(v.name).shape, v.shape) << v.name;
  }
  EXPECT_EQ(raw.size(), (*k2)->tensors().size() + KimiK25VisionTensors().size());

  auto k25 = OpenCheckpoint(tmp / "k25");
  ASSERT_TRUE(k25.ok()) << k25.status().ToString();
  EXPECT_EQ((*k25)->config().tensor_prefix, "") << "the loader strips the prefix";
  EXPECT_EQ((*k25)->tensors().size(), (*k2)->tensors().size()) << "vision tensors skipped";
}

// WeightsFromCheckpoint hands back the file's rows: MLA's interleaved RoPE is
// the model's own, not a GGUF permutation to undo.
TEST(DeepseekFixtureTest, WeightsFromCheckpointKeepsMlaRows) {
  TempDir tmp;
  FixtureOptions o;
  o.preset = "moonlight-tiny";  // plain q_proj, the name the llama permutation targets
  o.out = tmp / "m";
  o.seed = 2;
  ASSERT_TRUE(MakeFixture(o).ok());
  auto ck = OpenCheckpoint(o.out);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto weights = WeightsFromCheckpoint(**ck);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const std::vector<WeightSource> want = RandomWeights((*ck)->config(), 2);
  ASSERT_EQ(weights->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ((*weights)[i].name, want[i].name);
    const int64_t cols = want[i].shape.back();
    const int64_t rows = want[i].shape.size() == 1 ? 1 : want[i].shape[0];
    std::vector<float> a(static_cast<size_t>(cols)), b(a.size());
    for (int64_t r = 0; r < rows; ++r) {
      (*weights)[i].rows(r, a.data());
      want[i].rows(r, b.data());
      ASSERT_EQ(a, b) << want[i].name << " row " << r;
    }
  }
}

TEST(DeepseekFixtureTest, SameSeedSameBytes) {
  TempDir tmp;
  FixtureOptions o;
  o.preset = "deepseek-v3-tiny";
  o.seed = 1;
  o.out = tmp / "a";
  ASSERT_TRUE(MakeFixture(o).ok());
  o.out = tmp / "b";
  ASSERT_TRUE(MakeFixture(o).ok());
  o.seed = 2;
  o.out = tmp / "c";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto a = ReadFileToString(tmp / "a/model.safetensors");
  auto b = ReadFileToString(tmp / "b/model.safetensors");
  auto c = ReadFileToString(tmp / "c/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

}  // namespace
}  // namespace specd
