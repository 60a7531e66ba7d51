// Writers -> readers round trips. The reference values are the fixture's own
// RowFn outputs, passed through the scalar QuantizeRow/DequantizeRow of
// tensor/dtype.h, never through the reader under test.
#include <gtest/gtest.h>

#include <cmath>

#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/test_util.h"
#include "loader/weight_names.h"
#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"

namespace specd {
namespace {

using testing_util::RowOf;
using testing_util::TempDir;

// What a weight row looks like after storing it as `dt` and reading it back.
std::vector<float> Stored(const WeightSource& w, int64_t r, DType dt) {
  const int64_t cols = w.shape.back();
  std::vector<float> x(static_cast<size_t>(cols)), y(x.size());
  w.rows(r, x.data());
  std::vector<uint8_t> buf(RowBytes(dt, cols));
  QuantizeRow(dt, x.data(), buf.data(), cols);
  DequantizeRow(dt, buf.data(), y.data(), cols);
  return y;
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.ffn_dim, b.ffn_dim);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_FLOAT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_FLOAT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_FLOAT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_FLOAT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_FLOAT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position, b.rope_scaling.original_max_position);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_ids, b.eos_ids);
  EXPECT_FLOAT_EQ(a.rope_scaling.beta_fast, b.rope_scaling.beta_fast);
  EXPECT_FLOAT_EQ(a.rope_scaling.beta_slow, b.rope_scaling.beta_slow);
  EXPECT_FLOAT_EQ(a.rope_scaling.mscale, b.rope_scaling.mscale);
  EXPECT_FLOAT_EQ(a.rope_scaling.mscale_all_dim, b.rope_scaling.mscale_all_dim);
  EXPECT_EQ(a.rope_scaling.truncate, b.rope_scaling.truncate);
  EXPECT_EQ(a.mla.q_lora_rank, b.mla.q_lora_rank);
  EXPECT_EQ(a.mla.kv_lora_rank, b.mla.kv_lora_rank);
  EXPECT_EQ(a.mla.qk_nope_head_dim, b.mla.qk_nope_head_dim);
  EXPECT_EQ(a.mla.qk_rope_head_dim, b.mla.qk_rope_head_dim);
  EXPECT_EQ(a.mla.v_head_dim, b.mla.v_head_dim);
  EXPECT_EQ(a.moe.n_routed_experts, b.moe.n_routed_experts);
  EXPECT_EQ(a.moe.n_shared_experts, b.moe.n_shared_experts);
  EXPECT_EQ(a.moe.top_k, b.moe.top_k);
  EXPECT_EQ(a.moe.expert_ffn_dim, b.moe.expert_ffn_dim);
  EXPECT_EQ(a.moe.first_k_dense, b.moe.first_k_dense);
  EXPECT_EQ(a.moe.layer_freq, b.moe.layer_freq);
  EXPECT_EQ(a.moe.scoring, b.moe.scoring);
  EXPECT_EQ(a.moe.topk_method, b.moe.topk_method);
  EXPECT_EQ(a.moe.n_group, b.moe.n_group);
  EXPECT_EQ(a.moe.topk_group, b.moe.topk_group);
  EXPECT_EQ(a.moe.norm_topk_prob, b.moe.norm_topk_prob);
  EXPECT_FLOAT_EQ(a.moe.routed_scaling_factor, b.moe.routed_scaling_factor);
  EXPECT_EQ(a.tensor_prefix, b.tensor_prefix);
}

class RoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTripTest, SafetensorsF32IsExact) {
  auto c = FixturePreset(GetParam());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  TempDir tmp;
  FixtureOptions o;
  o.preset = GetParam();
  o.out = tmp / "model";
  o.seed = 7;
  ASSERT_TRUE(MakeFixture(o).ok());
  auto ck = OpenCheckpoint(o.out);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ExpectSameConfig(*c, (*ck)->config());
  EXPECT_EQ((*ck)->config().rope_style, RopeStyle::kHalf);
  for (const WeightSource& w : RandomWeights(*c, 7)) {
    auto t = (*ck)->Get(w.name, w.shape);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (int64_t r = 0; r < t->rows(); ++r)
      ASSERT_EQ(RowOf(*t, r), Stored(w, r, DType::kF32)) << w.name;
  }
  if (c->tie_embeddings) {
    EXPECT_EQ((*ck)->Get("lm_head.weight")->data, (*ck)->Get("model.embed_tokens.weight")->data);
  }
}

// GGUF in every dtype: q/k rows permuted for llama only; norms and biases F32;
// values equal the scalar quantize->dequantize of the source row.
TEST_P(RoundTripTest, GgufAllDtypesMatchReferenceQuantization) {
  auto c = FixturePreset(GetParam());
  ASSERT_TRUE(c.ok());
  const std::vector<WeightSource> weights = RandomWeights(*c, 3);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(dt));
    TempDir tmp;
    FixtureOptions o;
    o.preset = GetParam();
    o.format = "gguf";
    o.dtype = dt;
    o.out = tmp / "model.gguf";
    o.seed = 3;
    ASSERT_TRUE(MakeFixture(o).ok());
    auto ck = OpenCheckpoint(o.out);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    const ModelConfig& b = (*ck)->config();
    ExpectSameConfig(*c, b);
    const bool llama = c->arch == "llama";
    EXPECT_EQ(b.rope_style, llama ? RopeStyle::kInterleaved : RopeStyle::kHalf);
    for (const WeightSource& w : weights) {
      auto t = (*ck)->Get(w.name, w.shape);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      const DType want = w.shape.size() == 1 ? DType::kF32 : dt;
      ASSERT_EQ(t->dtype, want) << w.name;
      int n_head = 0;
      const bool permuted = llama && IsPermutedForGguf(w.name, *c, &n_head);
      for (int64_t r = 0; r < t->rows(); ++r) {
        const int64_t src = permuted ? GgufRowToHfRow(r, t->rows(), n_head) : r;
        ASSERT_EQ(RowOf(*t, r), Stored(w, src, want)) << w.name << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, RoundTripTest,
                         ::testing::Values("tiny", "qwen2-tiny", "qwen3-tiny"));

// DeepSeek-V2/V3 family presets: config.json reads back as the same
// ModelConfig (MLA, MoE routing, YaRN), and every tensor holds the fixture's
// values: the matrices in the requested dtype, the routers'
// e_score_correction_bias in f32 (StoredDType). Kimi-K2.5's "language_model."
// prefix is stripped by the loader (its checkpoint's tensor_prefix is empty).
class DeepseekRoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekRoundTripTest, SafetensorsConfigAndValuesRoundTrip) {
  auto c = FixturePreset(GetParam());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->IsMla());
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dt));
    TempDir tmp;
    FixtureOptions o;
    o.preset = GetParam();
    o.dtype = dt;
    o.out = tmp / "model";
    o.seed = 9;
    ASSERT_TRUE(MakeFixture(o).ok());
    auto ck = OpenCheckpoint(o.out);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    ModelConfig want = *c;
    want.tensor_prefix.clear();
    ExpectSameConfig(want, (*ck)->config());
    EXPECT_EQ((*ck)->config().rope_style, RopeStyle::kInterleaved);
    size_t n_bias = 0;
    for (const WeightSource& w : RandomWeights(*c, 9)) {
      auto t = (*ck)->Get(w.name.substr(c->tensor_prefix.size()), w.shape);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      const bool bias = w.name.find("e_score_correction_bias") != std::string::npos;
      n_bias += bias;
      const DType want = bias ? DType::kF32 : dt;
      ASSERT_EQ(t->dtype, want) << w.name;
      for (int64_t r = 0; r < t->rows(); ++r) ASSERT_EQ(RowOf(*t, r), Stored(w, r, want)) << w.name;
    }
    EXPECT_EQ(n_bias, c->moe.topk_method == "noaux_tc" ? 2u : 0u);  // MoE layers 1 and 2
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, DeepseekRoundTripTest,
                         ::testing::Values("deepseek-v3-tiny", "kimi-k2-tiny", "kimi-k25-tiny",
                                           "moonlight-tiny", "deepseek-v2-lite-tiny"));

TEST(RoundTripTest, SafetensorsAndGgufBf16GiveSameValues) {
  TempDir tmp;
  FixtureOptions o;
  o.dtype = DType::kBF16;
  o.out = tmp / "st";
  ASSERT_TRUE(MakeFixture(o).ok());
  o.format = "gguf";
  o.out = tmp / "m.gguf";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto st = OpenCheckpoint(tmp / "st");
  auto gg = OpenCheckpoint(tmp / "m.gguf");
  ASSERT_TRUE(st.ok() && gg.ok());
  const ModelConfig& c = (*gg)->config();
  for (const auto& [name, a] : (*st)->tensors()) {
    auto b = (*gg)->Get(name, a.shape);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    int n_head = 0;
    const bool permuted = IsPermutedForGguf(name, c, &n_head);
    for (int64_t r = 0; r < a.rows(); ++r) {
      ASSERT_EQ(RowOf(*b, r), RowOf(a, permuted ? GgufRowToHfRow(r, a.rows(), n_head) : r)) << name;
    }
  }
}

// GGUF llama -> WeightsFromCheckpoint undoes the permutation -> safetensors
// gives back the original HF rows; GGUF -> GGUF keeps the file's rows.
TEST(RoundTripTest, ConvertingGgufBackToSafetensorsUndoesPermutation) {
  TempDir tmp;
  FixtureOptions o;
  o.format = "gguf";
  o.out = tmp / "m.gguf";
  o.seed = 11;
  ASSERT_TRUE(MakeFixture(o).ok());
  auto gg = OpenCheckpoint(o.out);
  ASSERT_TRUE(gg.ok());
  auto weights = WeightsFromCheckpoint(**gg);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  ASSERT_TRUE(WriteSafetensorsModel((*gg)->config(), *weights, DType::kF32, tmp / "back").ok());
  GgufModelOptions go;
  go.dtype = DType::kF32;
  ASSERT_TRUE(WriteGgufModel((*gg)->config(), *weights, go, tmp / "again.gguf").ok());
  auto st = OpenCheckpoint(tmp / "back");
  auto again = OpenCheckpoint(tmp / "again.gguf");
  ASSERT_TRUE(st.ok() && again.ok());
  auto c = FixturePreset("tiny");
  for (const WeightSource& w : RandomWeights(*c, 11)) {
    auto t = (*st)->Get(w.name, w.shape);
    ASSERT_TRUE(t.ok());
    for (int64_t r = 0; r < t->rows(); ++r)
      ASSERT_EQ(RowOf(*t, r), Stored(w, r, DType::kF32)) << w.name;
    auto a = (*gg)->Get(w.name);
    auto b = (*again)->Get(w.name);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->nbytes, b->nbytes);
    EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << w.name;
  }
}

TEST(RoundTripTest, Llama3RopeScalingSurvivesGguf) {
  auto c = FixturePreset("tiny");
  ASSERT_TRUE(c.ok());
  c->rope_scaling.type = "llama3";
  c->rope_scaling.factor = 32.f;
  c->rope_scaling.original_max_position = 8192;
  c->rope_theta = 500000.f;
  c->max_seq_len = 131072;
  TempDir tmp;
  GgufModelOptions go;
  go.dtype = DType::kF16;
  ASSERT_TRUE(WriteGgufModel(*c, RandomWeights(*c, 1), go, tmp / "m.gguf").ok());
  auto ck = OpenCheckpoint(tmp / "m.gguf");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ExpectSameConfig(*c, (*ck)->config());
  ASSERT_TRUE(WriteSafetensorsModel(*c, RandomWeights(*c, 1), DType::kF16, tmp / "st").ok());
  auto st = OpenCheckpoint(tmp / "st");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ExpectSameConfig(*c, (*st)->config());
}

TEST(FixtureTest, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir tmp;
  FixtureOptions o;
  o.format = "gguf";
  o.dtype = DType::kQ8_0;
  o.seed = 5;
  o.out = tmp / "a.gguf";
  ASSERT_TRUE(MakeFixture(o).ok());
  o.out = tmp / "b.gguf";
  ASSERT_TRUE(MakeFixture(o).ok());
  o.seed = 6;
  o.out = tmp / "c.gguf";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto a = ReadFileToString(tmp / "a.gguf");
  auto b = ReadFileToString(tmp / "b.gguf");
  auto c = ReadFileToString(tmp / "c.gguf");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(a->size(), c->size());
}

TEST(FixtureTest, WeightStatisticsAreSane) {
  auto c = FixturePreset("tiny");
  ASSERT_TRUE(c.ok());
  for (const WeightSource& w : RandomWeights(*c, 0)) {
    std::vector<float> row(static_cast<size_t>(w.shape.back()));
    double sum = 0, sq = 0;
    int64_t n = 0;
    const int64_t rows = w.shape.size() == 1 ? 1 : w.shape[0];
    for (int64_t r = 0; r < rows; ++r) {
      w.rows(r, row.data());
      for (float x : row) {
        sum += x;
        sq += double{x} * x;
        ++n;
      }
    }
    if (w.shape.size() == 1) {
      EXPECT_EQ(sum, static_cast<double>(n)) << w.name << ": norms are 1";
      continue;
    }
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.002) << w.name;
    EXPECT_NEAR(sd, 0.02, 0.002) << w.name;
  }
}

TEST(FixtureTest, RejectsImpossibleCombinations) {
  TempDir tmp;
  FixtureOptions o;
  o.out = tmp / "x";
  o.dtype = DType::kQ4_0;
  Status st = MakeFixture(o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("gguf"), std::string::npos) << st.message();
  o.dtype = DType::kF32;
  o.preset = "nope";
  st = MakeFixture(o);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("llama-3.2-1b"), std::string::npos) << st.message();
  o.preset = "tiny";
  o.format = "onnx";
  EXPECT_EQ(MakeFixture(o).code(), StatusCode::kInvalidArgument);
}

TEST(FixtureTest, LargePresetsHaveRealShapes) {
  auto c = FixturePreset("llama-3.2-1b");
  ASSERT_TRUE(c.ok());
  int64_t params = 0;
  for (const TensorSpec& s : ExpectedTensors(*c)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    params += n;
  }
  // Llama 3.2 1B has 1,235,814,400 parameters (tied embeddings).
  EXPECT_EQ(params, 1235814400);
  auto s = FixturePreset("small-170m");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->n_kv_heads, 4);
  EXPECT_TRUE(s->tie_embeddings);
}

}  // namespace
}  // namespace specd

namespace specd {
namespace {

// Rows that are not whole 32-element blocks cannot be Q8_0/Q4_0: such
// matrices fall back to F16 (as stories260K's FFN of 172 needs).
TEST(RoundTripTest, OddRowLengthsFallBackToF16) {
  auto c = FixturePreset("tiny");
  ASSERT_TRUE(c.ok());
  c->ffn_dim = 40;
  TempDir tmp;
  GgufModelOptions go;
  go.dtype = DType::kQ4_0;
  const auto weights = RandomWeights(*c, 2);
  ASSERT_TRUE(WriteGgufModel(*c, weights, go, tmp / "m.gguf").ok());
  auto ck = OpenCheckpoint(tmp / "m.gguf");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->Get("model.layers.0.mlp.down_proj.weight")->dtype, DType::kF16);  // 40 columns
  EXPECT_EQ((*ck)->Get("model.layers.0.mlp.up_proj.weight")->dtype, DType::kQ4_0);   // 64 columns
  for (const WeightSource& w : weights) {
    if (w.name != "model.layers.1.mlp.down_proj.weight") continue;
    auto t = (*ck)->Get(w.name, w.shape);
    ASSERT_TRUE(t.ok());
    for (int64_t r = 0; r < t->rows(); ++r) ASSERT_EQ(RowOf(*t, r), Stored(w, r, DType::kF16));
  }
}

}  // namespace
}  // namespace specd
