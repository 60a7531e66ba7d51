// config.json parsing per architecture and validation messages.
#include <gtest/gtest.h>

#include <cmath>

#include "loader/model_config.h"

namespace specd {
namespace {

// Llama 3.2 1B's config.json as published (trimmed of keys we ignore).
constexpr const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "vocab_size": 128256})";

StatusOr<ModelConfig> Parse(const std::string& text) { return ParseHfConfig(text, "cfg/config.json"); }

// Replaces `from` by `to` once in kLlama32.
std::string Llama32With(const std::string& from, const std::string& to) {
  std::string s = kLlama32;
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

TEST(ModelConfigTest, Llama32) {
  auto c = Parse(kLlama32);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->n_layers, 16);
  EXPECT_EQ(c->hidden_dim, 2048);
  EXPECT_EQ(c->ffn_dim, 8192);
  EXPECT_EQ(c->n_heads, 32);
  EXPECT_EQ(c->n_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->max_seq_len, 131072);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.f);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.f);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.f);
  EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->bos_id, 128000);
  EXPECT_EQ(c->eos_ids, (std::vector<int>{128001, 128008, 128009}));
}

TEST(ModelConfigTest, Llama2DefaultsAndLegacyRopeScalingType) {
  // Llama 2 style: no head_dim, no num_key_value_heads, no rope_theta,
  // eos as a single int; linear scaling written with the old "type" key.
  auto c = Parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
      "vocab_size": 32000, "max_position_embeddings": 4096, "bos_token_id": 1,
      "eos_token_id": 2, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->n_kv_heads, 32);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.f);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-6f);
  EXPECT_EQ(c->rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 2.f);
  EXPECT_FALSE(c->tie_embeddings);
  EXPECT_EQ(c->eos_ids, std::vector<int>{2});
}

TEST(ModelConfigTest, Mistral) {
  auto c = Parse(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
      "num_hidden_layers": 32, "vocab_size": 32768, "rope_theta": 1000000.0,
      "sliding_window": null, "head_dim": null, "rope_scaling": null})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "mistral");
  EXPECT_EQ(c->head_dim, 128);  // null head_dim counts as absent
  EXPECT_EQ(c->max_seq_len, 32768);
  EXPECT_TRUE(c->rope_scaling.type.empty());
}

TEST(ModelConfigTest, Qwen2HasQkvBias) {
  auto c = Parse(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896,
      "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
      "num_hidden_layers": 24, "vocab_size": 151936, "max_position_embeddings": 32768,
      "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
      "bos_token_id": 151643, "eos_token_id": 151645, "use_sliding_window": false})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "qwen2");
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
}

TEST(ModelConfigTest, Qwen3HasQkNormAndOwnHeadDim) {
  auto c = Parse(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024,
      "intermediate_size": 3072, "num_attention_heads": 16, "num_key_value_heads": 8,
      "head_dim": 128, "num_hidden_layers": 28, "vocab_size": 151936,
      "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
      "attention_bias": false, "tie_word_embeddings": true, "eos_token_id": 151645})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "qwen3");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->head_dim, 128);  // != 1024 / 16
  EXPECT_EQ(c->bos_id, -1);
}

TEST(ModelConfigTest, Eagle3DraftHead) {
  auto c = Parse(R"({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
      "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000,
      "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "target_hidden_size": 4096,
      "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]},
      "bos_token_id": 128000, "eos_token_id": 128001})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "llama_eagle3");
  EXPECT_EQ(c->n_layers, 1);
  EXPECT_EQ(c->draft_vocab_size, 32000);
  EXPECT_EQ(c->target_hidden_size, 4096);
  EXPECT_EQ(c->eagle_aux_layer_ids, (std::vector<int>{1, 15, 28}));
}

TEST(ModelConfigTest, ModelTypeWithoutArchitectures) {
  auto c = Parse(R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 256})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "qwen3");
}

TEST(ModelConfigTest, UnknownArchitectureNamesValueAndSupportedList) {
  ExpectError(Llama32With("LlamaForCausalLM", "GPT2LMHeadModel"), StatusCode::kUnsupported,
              {"cfg/config.json", "GPT2LMHeadModel", "Qwen3ForCausalLM", "LlamaForCausalLM"});
}

TEST(ModelConfigTest, MissingKeyNamesKeyAndFile) {
  ExpectError(Llama32With("\"hidden_size\": 2048,", ""), StatusCode::kNotFound,
              {"cfg/config.json", "'hidden_size'"});
}

TEST(ModelConfigTest, WrongTypeNamesKeyExpectedAndFound) {
  ExpectError(Llama32With("\"hidden_size\": 2048", "\"hidden_size\": \"2048\""),
              StatusCode::kInvalidArgument, {"'hidden_size'", "expected integer", "found string"});
  ExpectError(Llama32With("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": [1]"),
              StatusCode::kInvalidArgument, {"'rms_norm_eps'", "expected number", "found array"});
  ExpectError(Llama32With("\"eos_token_id\": [128001, 128008, 128009]", "\"eos_token_id\": [1.5]"),
              StatusCode::kInvalidArgument, {"'eos_token_id'", "list of integers"});
  ExpectError(Llama32With("\"factor\": 32.0", "\"factor\": \"x\""), StatusCode::kInvalidArgument,
              {"'rope_scaling.factor'", "expected number", "found string"});
  ExpectError(Llama32With("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1"),
              StatusCode::kInvalidArgument, {"'tie_word_embeddings'", "boolean", "integer"});
}

TEST(ModelConfigTest, NotJsonIsCorruption) {
  ExpectError("{\"hidden_size\": ", StatusCode::kCorruption, {"cfg/config.json", "not valid JSON"});
  ExpectError("[1, 2]", StatusCode::kCorruption, {"JSON object"});
}

TEST(ModelConfigTest, AbsurdValuesNameKeyValueAndExpectation) {
  struct Case {
    std::string from, to;
    std::vector<std::string> parts;
  } cases[] = {
      {"\"num_hidden_layers\": 16", "\"num_hidden_layers\": 0", {"num_hidden_layers = 0", "[1, 1024]"}},
      {"\"num_hidden_layers\": 16", "\"num_hidden_layers\": 5000", {"num_hidden_layers = 5000"}},
      {"\"hidden_size\": 2048", "\"hidden_size\": -1", {"hidden_size = -1"}},
      {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5",
       {"num_key_value_heads = 5", "divisor", "32"}},
      {"\"num_key_value_heads\": 8", "\"num_key_value_heads\": 64", {"num_key_value_heads = 64"}},
      {"\"vocab_size\": 128256", "\"vocab_size\": 20000000", {"vocab_size = 20000000", "16777216"}},
      {"\"max_position_embeddings\": 131072", "\"max_position_embeddings\": 100000000",
       {"max_position_embeddings = 100000000"}},
      {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0", {"rms_norm_eps = 0", "(0, 1)"}},
      {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1.5", {"rms_norm_eps = 1.5"}},
      {"\"rope_theta\": 500000.0", "\"rope_theta\": -1", {"rope_theta = -1", "positive"}},
      {"\"head_dim\": 64", "\"head_dim\": 63", {"head_dim = 63", "even"}},
      {"\"factor\": 32.0", "\"factor\": 0", {"rope_scaling.factor = 0"}},
      {"\"high_freq_factor\": 4.0", "\"high_freq_factor\": 0.5", {"rope_scaling.high_freq_factor"}},
      {"\"bos_token_id\": 128000", "\"bos_token_id\": 999999", {"bos_token_id = 999999"}},
      {"\"hidden_size\": 2048", "\"hidden_size\": 99999999999", {"'hidden_size' = 99999999999"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    auto parsed = Parse(Llama32With(c.from, c.to));
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find("cfg/config.json"), std::string::npos);
    for (const std::string& p : c.parts) {
      EXPECT_NE(parsed.status().message().find(p), std::string::npos)
          << "'" << p << "' not in: " << parsed.status().message();
    }
  }
}

TEST(ModelConfigTest, HiddenNotDivisibleWithoutHeadDim) {
  ExpectError(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
      "intermediate_size": 8192, "num_attention_heads": 30, "num_hidden_layers": 2,
      "vocab_size": 1000})",
              StatusCode::kInvalidArgument, {"'hidden_size' = 2048", "num_attention_heads (30)"});
}

TEST(ModelConfigTest, UnsupportedFeaturesAreNamed) {
  ExpectError(Llama32With("\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\""),
              StatusCode::kUnsupported, {"yarn", "llama3, linear"});
  ExpectError(Llama32With("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\""),
              StatusCode::kUnsupported, {"hidden_act", "gelu"});
  ExpectError(Llama32With("\"attention_bias\": false", "\"attention_bias\": true"),
              StatusCode::kUnsupported, {"attention_bias"});
}

TEST(ModelConfigTest, Llama3FreqFactorsMatchReferenceFormula) {
  // Reference values from the Llama 3.1 apply_scaling formula for head_dim
  // 64, theta 500000, factor 32, low 1, high 4, original 8192: the first
  // pairs (short wavelengths) are unscaled, the last ones divided by 32.
  RopeScaling s;
  s.type = "llama3";
  s.factor = 32.f;
  std::vector<float> f = Llama3RopeFreqFactors(64, 500000.f, s);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_FLOAT_EQ(f[0], 1.f);
  EXPECT_FLOAT_EQ(f[31], 32.f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
  // Pair k has wavelength 2*pi*500000^(2k/64): pair 14 (1956.5) is below
  // 8192/4 (unscaled), pair 18 (10089.1) above 8192/1 (scaled by 32), pair
  // 16 (4442.9) in the band: smooth = (8192/w - 1) / (4 - 1).
  const double w16 = 2 * M_PI * std::pow(500000.0, 32.0 / 64);
  const double smooth = (8192 / w16 - 1) / 3;
  EXPECT_FLOAT_EQ(f[14], 1.f);
  EXPECT_NEAR(f[16], 1.0 / ((1 - smooth) / 32 + smooth), 1e-5);
  EXPECT_FLOAT_EQ(f[18], 32.f);
}

}  // namespace
}  // namespace specd
