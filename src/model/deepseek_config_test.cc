// config.json of the DeepSeek-V2/V3 family (Kimi-K2, Kimi-K2.5, Moonlight,
// DeepSeek-V2-Lite): parsed fields, YaRN against transformers' numbers, and
// the errors for configs the forward pass cannot run.
#include <gtest/gtest.h>

#include <cmath>

#include "loader/model_config.h"
#include "model/rope.h"

namespace specd {
namespace {

// Kimi-K2-Instruct's config.json as published (keys the parser ignores trimmed).
constexpr const char* kKimiK2 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
  "bos_token_id": 163584, "eos_token_id": 163585, "first_k_dense_replace": 1,
  "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 131072, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 1, "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 64, "num_nextn_predict_layers": 0, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "noaux_tc",
  "v_head_dim": 128, "vocab_size": 163840})";

// DeepSeek-V2-Lite-Chat's config.json (trimmed).
constexpr const char* kV2Lite = R"({
  "architectures": ["DeepseekV2ForCausalLM"], "bos_token_id": 100000, "eos_token_id": 100001,
  "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
  "intermediate_size": 10944, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
  "n_shared_experts": 2, "norm_topk_prob": false, "num_attention_heads": 16,
  "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
  "q_lora_rank": null, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                   "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "greedy", "v_head_dim": 128,
  "vocab_size": 102400})";

StatusOr<ModelConfig> Parse(const std::string& text) { return ParseHfConfig(text, "cfg/config.json"); }

std::string With(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  return s.replace(p, from.size(), to);
}

void ExpectError(const std::string& text, StatusCode code, std::vector<std::string> parts) {
  auto c = Parse(text);
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.status().code(), code) << c.status().ToString();
  for (const std::string& p : parts) {
    EXPECT_NE(c.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << c.status().message();
  }
}

TEST(DeepseekConfigTest, KimiK2) {
  auto r = Parse(kKimiK2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.arch, "deepseek_v3");
  EXPECT_TRUE(c.IsMla());
  EXPECT_EQ(c.n_layers, 61);
  EXPECT_EQ(c.n_heads, 64);
  EXPECT_EQ(c.n_kv_heads, 64);
  EXPECT_EQ(c.head_dim, 64);  // the rotated part
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(c.mla.q_lora_rank, 1536);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.mla.latent_dim(), 576);
  EXPECT_EQ(c.mla.qk_head_dim(), 192);
  EXPECT_EQ(c.mla.v_head_dim, 128);
  EXPECT_EQ(c.moe.n_routed_experts, 384);
  EXPECT_EQ(c.moe.top_k, 8);
  EXPECT_EQ(c.moe.n_shared_experts, 1);
  EXPECT_EQ(c.moe.expert_ffn_dim, 2048);
  EXPECT_EQ(c.moe.scoring, "sigmoid");
  EXPECT_EQ(c.moe.topk_method, "noaux_tc");
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.moe.routed_scaling_factor, 2.827f);
  EXPECT_FALSE(c.moe.IsMoeLayer(0));
  EXPECT_TRUE(c.moe.IsMoeLayer(1));
  EXPECT_TRUE(c.moe.IsMoeLayer(60));
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.f);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_fast, 1.f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 4096);
  EXPECT_TRUE(c.tensor_prefix.empty());
}

// Numbers printed by transformers 5.25's ROPE_INIT_FUNCTIONS["yarn"] and
// yarn_apply_mscale for a DeepseekV3Config with these rope_parameters
// (tests/python/deepseek/yarn_reference.py).
TEST(DeepseekConfigTest, YarnMatchesTransformers) {
  auto kimi = Parse(kKimiK2);
  ASSERT_TRUE(kimi.ok());
  std::vector<float> inv = RopeInvFreq(*kimi);
  ASSERT_EQ(inv.size(), 32u);
  const std::pair<int, double> want[] = {{0, 1.0},
                                         {1, 0.7131111025810242},
                                         {5, 0.18441061675548553},
                                         {10, 0.034007277339696884},
                                         {16, 0.004472136031836271},
                                         {20, 3.614046727307141e-05},
                                         {31, 8.764412768869079e-07}};
  for (auto [i, v] : want) EXPECT_NEAR(inv[i], v, 1e-6 * v) << i;
  EXPECT_DOUBLE_EQ(RopeAttentionFactor(*kimi), 1.0);
  EXPECT_NEAR(MlaSoftmaxScale(*kimi), 0.13086079996295005, 1e-12);

  // DeepSeek-V3: factor 40, beta_fast 32.
  std::string v3 = With(With(With(kKimiK2, R"("factor": 32.0)", R"("factor": 40.0)"),
                             R"("beta_fast": 1.0)", R"("beta_fast": 32)"),
                        R"("rope_theta": 50000.0)", R"("rope_theta": 10000.0)");
  auto ds = Parse(v3);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  inv = RopeInvFreq(*ds);
  const std::pair<int, double> want_v3[] = {{1, 0.7498942017555237},
                                            {5, 0.23713736236095428},
                                            {10, 0.05623412877321243},
                                            {16, 0.005500000435858965},
                                            {20, 0.0007905694073997438},
                                            {31, 3.3338035336782923e-06}};
  for (auto [i, v] : want_v3) EXPECT_NEAR(inv[i], v, 1e-6 * v) << i;
  EXPECT_NEAR(MlaSoftmaxScale(*ds), 0.1352337788608801, 1e-12);
}

TEST(DeepseekConfigTest, YarnWithoutMscaleAllDimScalesCosSin) {
  // No mscale/mscale_all_dim: attention_factor = 0.1 ln(factor) + 1 (cos/sin),
  // softmax scale untouched.
  std::string s = With(kKimiK2, R"("mscale": 1.0,
                   "mscale_all_dim": 1.0,)", "");
  auto c = Parse(s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(RopeAttentionFactor(*c), 1 + 0.1 * std::log(32.0), 1e-12);
  EXPECT_NEAR(MlaSoftmaxScale(*c), 1 / std::sqrt(192.0), 1e-12);
}

TEST(DeepseekConfigTest, KimiK25NestsTheTextModel) {
  std::string k25 = std::string(R"({"architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25", "vision_config": {"hidden_size": 1152}, "text_config": )") +
                    kKimiK2 + "}";
  auto c = Parse(k25);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "deepseek_v3");
  EXPECT_EQ(c->tensor_prefix, "language_model.");
  EXPECT_EQ(c->moe.n_routed_experts, 384);
  // Errors inside text_config name the nested key.
  std::string bad = With(k25, R"("kv_lora_rank": 512,)", "");
  ExpectError(bad, StatusCode::kNotFound, {"text_config.kv_lora_rank"});
  ExpectError(R"({"architectures": ["KimiK25ForConditionalGeneration"]})", StatusCode::kNotFound,
              {"text_config"});
}

TEST(DeepseekConfigTest, V2LiteAndMoonlight) {
  auto c = Parse(kV2Lite);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "deepseek_v2");
  EXPECT_EQ(c->mla.q_lora_rank, 0);
  EXPECT_EQ(c->moe.scoring, "softmax");
  EXPECT_EQ(c->moe.topk_method, "greedy");
  EXPECT_FALSE(c->moe.norm_topk_prob);
  EXPECT_EQ(c->moe.n_shared_experts, 2);
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved);
  // Moonlight: DeepseekV3 without a q LoRA.
  std::string moon = With(kKimiK2, R"("q_lora_rank": 1536)", R"("q_lora_rank": null)");
  auto m = Parse(moon);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->mla.q_lora_rank, 0);
}

TEST(DeepseekConfigTest, RejectsWhatTheForwardPassCannotRun) {
  ExpectError(With(kKimiK2, R"("scoring_func": "sigmoid")", R"("scoring_func": "softmax")"),
              StatusCode::kUnsupported, {"scoring_func", "softmax", "DeepseekV3ForCausalLM"});
  ExpectError(With(kV2Lite, R"("topk_method": "greedy")", R"("topk_method": "noaux_tc")"),
              StatusCode::kUnsupported, {"noaux_tc", "DeepseekV2ForCausalLM"});
  ExpectError(With(kKimiK2, R"("n_group": 1)", R"("n_group": 5)"), StatusCode::kInvalidArgument,
              {"n_group", "5", "384"});
  ExpectError(With(kKimiK2, R"("num_experts_per_tok": 8)", R"("num_experts_per_tok": 400)"),
              StatusCode::kInvalidArgument, {"num_experts_per_tok", "400"});
  ExpectError(With(kKimiK2, R"("kv_lora_rank": 512,)", ""), StatusCode::kNotFound,
              {"kv_lora_rank"});
  ExpectError(With(kKimiK2, R"("qk_rope_head_dim": 64)", R"("qk_rope_head_dim": 63)"),
              StatusCode::kInvalidArgument, {"qk_rope_head_dim", "63", "even"});
  ExpectError(With(kKimiK2, R"("routed_scaling_factor": 2.827)", R"("routed_scaling_factor": -1)"),
              StatusCode::kInvalidArgument, {"routed_scaling_factor"});
  ExpectError(With(kKimiK2, R"("type": "yarn")", R"("type": "dynamic")"),
              StatusCode::kUnsupported, {"dynamic"});
  ExpectError(With(kKimiK2, R"("first_k_dense_replace": 1)", R"("first_k_dense_replace": 70)"),
              StatusCode::kInvalidArgument, {"first_k_dense_replace", "70"});
}

TEST(DeepseekConfigTest, YarnOnlyForTheDeepseekFamily) {
  constexpr const char* kLlama = R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 256,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}})";
  ExpectError(kLlama, StatusCode::kUnsupported, {"yarn", "DeepSeek"});
}

}  // namespace
}  // namespace specd
