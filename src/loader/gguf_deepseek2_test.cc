// llama.cpp `deepseek2` GGUF files: HF-named weights written by specd's
// deepseek2 writer (its layout checked against llama.cpp's own converter in
// modelgen/gguf_deepseek2_writer_test.cc) read back into the same ModelConfig
// and tensors; the legacy attn_kv_b layout, fused gate/up experts and MTP
// blocks; bad metadata and tensors rejected with the key / tensor named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "loader/checkpoint.h"
#include "loader/gguf_deepseek2.h"
#include "loader/gguf_reader.h"
#include "loader/test_util.h"
#include "loader/weight_names.h"
#include "modelgen/fixture.h"
#include "modelgen/gguf_deepseek2_writer.h"
#include "modelgen/gguf_writer.h"

namespace specd {
namespace {

using testing_util::RowOf;
using testing_util::TempDir;

// DeepSeek-V3 / Kimi-K2 shape: q LoRA, sigmoid + correction bias, 2 expert
// groups, YaRN with mscale_all_dim 1, layer 0 dense.
constexpr char kV3Json[] = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "vocab_size": 320, "hidden_size": 64,
  "intermediate_size": 96, "moe_intermediate_size": 32, "num_hidden_layers": 3,
  "num_attention_heads": 2, "num_key_value_heads": 2, "n_shared_experts": 1,
  "n_routed_experts": 4, "routed_scaling_factor": 2.5, "kv_lora_rank": 32, "q_lora_rank": 32,
  "qk_rope_head_dim": 16, "v_head_dim": 32, "qk_nope_head_dim": 32, "topk_method": "noaux_tc",
  "n_group": 2, "topk_group": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
  "norm_topk_prob": true, "scoring_func": "sigmoid", "max_position_embeddings": 163840,
  "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
  "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
  "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 1})";

// DeepSeek-V2-Lite / Moonlight shape: plain q_proj, softmax greedy, tied
// embeddings, mscale 0.707, qk_nope 16 (attn_k_b rows too short for Q8_0/Q4_0).
constexpr char kV2LiteJson[] = R"({
  "architectures": ["DeepseekV2ForCausalLM"], "vocab_size": 256, "hidden_size": 64,
  "intermediate_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 2, "num_key_value_heads": 2, "n_shared_experts": 2,
  "n_routed_experts": 4, "routed_scaling_factor": 1.0, "kv_lora_rank": 32, "q_lora_rank": null,
  "qk_rope_head_dim": 16, "v_head_dim": 32, "qk_nope_head_dim": 16, "topk_method": "greedy",
  "n_group": 1, "topk_group": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
  "norm_topk_prob": false, "scoring_func": "softmax", "max_position_embeddings": 163840,
  "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
  "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                   "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707},
  "tie_word_embeddings": true, "bos_token_id": 0, "eos_token_id": 1})";

ModelConfig Config(const char* json) {
  auto c = ParseHfConfig(json, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelConfig{};
}

std::string Write(const TempDir& dir, const ModelConfig& c, DType dt, const std::string& name,
                  const std::vector<WeightSource>& weights) {
  GgufModelOptions o;
  o.dtype = dt;
  const std::string path = dir / name;
  Status s = WriteDeepseek2Gguf(c, weights, o, path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

void ExpectSameConfig(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.n_layers, want.n_layers);
  EXPECT_EQ(got.hidden_dim, want.hidden_dim);
  EXPECT_EQ(got.ffn_dim, want.ffn_dim);
  EXPECT_EQ(got.n_heads, want.n_heads);
  EXPECT_EQ(got.n_kv_heads, want.n_kv_heads);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.max_seq_len, want.max_seq_len);
  EXPECT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_EQ(got.rope_theta, want.rope_theta);
  EXPECT_EQ(got.rope_style, want.rope_style);
  // A deepseek2 GGUF holds output.weight even for a tied config (a copy of
  // the embedding): read back, the head is never tied.
  EXPECT_FALSE(got.tie_embeddings);
  EXPECT_EQ(got.bos_id, want.bos_id);
  EXPECT_EQ(got.eos_ids, want.eos_ids);
  EXPECT_EQ(got.tensor_prefix, "");
  const RopeScaling &a = got.rope_scaling, &b = want.rope_scaling;
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.original_max_position, b.original_max_position);
  EXPECT_EQ(a.beta_fast, b.beta_fast);
  EXPECT_EQ(a.beta_slow, b.beta_slow);
  // Stored as 0.1 * mscale_all_dim in f32.
  EXPECT_NEAR(a.mscale, b.mscale, 1e-6);
  EXPECT_NEAR(a.mscale_all_dim, b.mscale_all_dim, 1e-6);
  EXPECT_EQ(got.mla.q_lora_rank, want.mla.q_lora_rank);
  EXPECT_EQ(got.mla.kv_lora_rank, want.mla.kv_lora_rank);
  EXPECT_EQ(got.mla.qk_nope_head_dim, want.mla.qk_nope_head_dim);
  EXPECT_EQ(got.mla.qk_rope_head_dim, want.mla.qk_rope_head_dim);
  EXPECT_EQ(got.mla.v_head_dim, want.mla.v_head_dim);
  const MoeConfig &x = got.moe, &y = want.moe;
  EXPECT_EQ(x.n_routed_experts, y.n_routed_experts);
  EXPECT_EQ(x.n_shared_experts, y.n_shared_experts);
  EXPECT_EQ(x.top_k, y.top_k);
  EXPECT_EQ(x.expert_ffn_dim, y.expert_ffn_dim);
  EXPECT_EQ(x.first_k_dense, y.first_k_dense);
  EXPECT_EQ(x.layer_freq, y.layer_freq);
  EXPECT_EQ(x.scoring, y.scoring);
  EXPECT_EQ(x.topk_method, y.topk_method);
  EXPECT_EQ(x.n_group, y.n_group);
  EXPECT_EQ(x.topk_group, y.topk_group);
  EXPECT_EQ(x.norm_topk_prob, y.norm_topk_prob);
  EXPECT_EQ(x.routed_scaling_factor, y.routed_scaling_factor);
}

// What a vector stored as `dt` reads back as.
std::vector<float> Stored(DType dt, std::vector<float> v) {
  std::vector<uint8_t> buf(RowBytes(dt, static_cast<int64_t>(v.size())));
  QuantizeRow(dt, v.data(), buf.data(), static_cast<int64_t>(v.size()));
  DequantizeRow(dt, buf.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// The dtype the writer's policy (modelgen/gguf_deepseek2_writer.h) stores a
// tensor of `shape` in; `router` for mlp.gate.weight.
DType Policy(DType dt, const std::vector<int64_t>& shape, bool router) {
  if (shape.size() < 2 || router) return DType::kF32;
  if (IsQuantized(dt) && shape.back() % kQuantBlock != 0) return DType::kF16;
  return dt;
}

std::vector<float> SourceRow(const WeightSource& w, int64_t r) {
  std::vector<float> v(static_cast<size_t>(w.shape.back()));
  w.rows(r, v.data());
  return v;
}

// kv_b_proj as llama.cpp's attn_k_b / attn_v_b hold it, then rebuilt: the k
// part is stored along qk_nope (per head, per latent column), the v part along
// kv_lora_rank.
std::vector<std::vector<float>> ExpectedKvB(const WeightSource& w, const ModelConfig& c, DType dt) {
  const int64_t nope = c.mla.qk_nope_head_dim, v = c.mla.v_head_dim, r = c.mla.kv_lora_rank;
  std::vector<std::vector<float>> rows;
  for (int64_t i = 0; i < w.shape[0]; ++i) rows.push_back(SourceRow(w, i));
  const DType kdt = Policy(dt, {c.n_heads, r, nope}, false);
  const DType vdt = Policy(dt, {c.n_heads, v, r}, false);
  for (int64_t h = 0; h < c.n_heads; ++h) {
    for (int64_t j = 0; j < r; ++j) {
      std::vector<float> col(static_cast<size_t>(nope));
      for (int64_t i = 0; i < nope; ++i) col[i] = rows[h * (nope + v) + i][j];
      col = Stored(kdt, col);
      for (int64_t i = 0; i < nope; ++i) rows[h * (nope + v) + i][j] = col[i];
    }
    for (int64_t i = 0; i < v; ++i) rows[h * (nope + v) + nope + i] = Stored(vdt, rows[h * (nope + v) + nope + i]);
  }
  return rows;
}

void ExpectSameTensors(const Checkpoint& ck, const ModelConfig& c,
                       const std::vector<WeightSource>& weights, DType dt) {
  for (const WeightSource& w : weights) {
    SCOPED_TRACE(w.name);
    auto t = ck.Get(w.name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->shape, w.shape);
    const bool kv_b = w.name.find("kv_b_proj") != std::string::npos;
    const bool router = w.name.size() > 16 && w.name.find(".mlp.gate.weight") != std::string::npos;
    std::vector<std::vector<float>> want;
    if (kv_b) {
      want = ExpectedKvB(w, c, dt);
    } else {
      const DType sdt = Policy(dt, w.shape, router);
      EXPECT_EQ(t->dtype, sdt);
      for (int64_t r = 0; r < t->rows(); ++r) want.push_back(Stored(sdt, SourceRow(w, r)));
    }
    for (int64_t r = 0; r < t->rows(); ++r) {
      ASSERT_EQ(RowOf(*t, r), want[r]) << "row " << r;
    }
  }
}

struct RoundTripCase {
  const char* json;
  DType dtype;
};

class Deepseek2RoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(Deepseek2RoundTripTest, ReadsBackTheSameConfigAndTensors) {
  const ModelConfig c = Config(GetParam().json);
  const DType dt = GetParam().dtype;
  TempDir dir;
  const std::vector<WeightSource> weights = RandomWeights(c, 11);
  const std::string path = Write(dir, c, dt, "m.gguf", weights);
  auto ck = OpenCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->format(), "gguf");
  ExpectSameConfig((*ck)->config(), c);
  ExpectSameTensors(**ck, c, weights, dt);
  if (c.tie_embeddings) {
    const TensorView& head = (*ck)->tensors().at("lm_head.weight");
    const TensorView& embed = (*ck)->tensors().at("model.embed_tokens.weight");
    ASSERT_EQ(head.shape, embed.shape);
    EXPECT_NE(head.data, embed.data) << "written twice, not aliased";
    for (int64_t r = 0; r < head.rows(); ++r) ASSERT_EQ(RowOf(head, r), RowOf(embed, r)) << r;
  }
  // kv_b_proj keeps a float type exactly; from quantized k_b/v_b it is F32.
  const DType kv_dt = (*ck)->tensors().at("model.layers.1.self_attn.kv_b_proj.weight").dtype;
  EXPECT_EQ(kv_dt, IsQuantized(dt) ? DType::kF32 : dt);
}

INSTANTIATE_TEST_SUITE_P(
    All, Deepseek2RoundTripTest,
    ::testing::Values(RoundTripCase{kV3Json, DType::kF32}, RoundTripCase{kV3Json, DType::kF16},
                      RoundTripCase{kV3Json, DType::kBF16}, RoundTripCase{kV3Json, DType::kQ8_0},
                      RoundTripCase{kV3Json, DType::kQ4_0}, RoundTripCase{kV2LiteJson, DType::kF32},
                      RoundTripCase{kV2LiteJson, DType::kF16},
                      RoundTripCase{kV2LiteJson, DType::kQ8_0},
                      RoundTripCase{kV2LiteJson, DType::kQ4_0}));

TEST(Deepseek2GgufTest, ExpertsAreZeroCopySlicesOfTheStackedTensor) {
  const ModelConfig c = Config(kV3Json);
  TempDir dir;
  const std::string path = Write(dir, c, DType::kQ8_0, "m.gguf", RandomWeights(c, 3));
  auto ck = OpenCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
    const uint8_t* next = nullptr;
    for (int x = 0; x < 4; ++x) {
      auto t = (*ck)->Get(fmt::format("model.layers.2.mlp.experts.{}.{}.weight", x, proj));
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(t->dtype, DType::kQ8_0);
      const auto* p = static_cast<const uint8_t*>(t->data);
      if (next != nullptr) {
        EXPECT_EQ(p, next) << proj << " expert " << x;
      }
      next = p + t->nbytes;
    }
  }
}

// ---- hand-edited files ----

// A GGUF as metadata plus f32 tensors, so tests can drop, change or add
// what no writer would.
struct Image {
  std::map<std::string, GgufValue> kv;
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;  // PyTorch order
    std::vector<float> data;
  };
  std::vector<Tensor> tensors;

  Tensor* Find(const std::string& name) {
    for (Tensor& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  void Drop(const std::string& name) {
    std::erase_if(tensors, [&](const Tensor& t) { return t.name == name; });
  }
  void SetU32(const std::string& key, uint32_t v) {
    GgufValue g;
    g.type = GgufType::kU32;
    g.u = v;
    g.i = v;
    kv[key] = g;
  }
};

Image Read(const std::string& path) {
  Image img;
  auto bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok());
  const auto* data = reinterpret_cast<const uint8_t*>(bytes->data());
  auto f = ParseGguf(data, bytes->size(), path, true);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  img.kv = f->kv;
  for (const GgufTensorInfo& ti : f->tensors) {
    Image::Tensor t{ti.name, {ti.ne.rbegin(), ti.ne.rend()}, {}};
    int64_t n = 1;
    for (int64_t d : ti.ne) n *= d;
    t.data.resize(static_cast<size_t>(n));
    const int64_t cols = ti.ne[0];
    for (int64_t r = 0; r < n / cols; ++r) {
      DequantizeRow(ti.dtype, data + f->data_offset + ti.offset + r * RowBytes(ti.dtype, cols),
                    &t.data[r * cols], cols);
    }
    img.tensors.push_back(std::move(t));
  }
  return img;
}

void WriteImage(const Image& img, const std::string& path) {
  GgufWriter w;
  for (const auto& [k, v] : img.kv) {
    switch (v.type) {
      case GgufType::kString: w.SetString(k, v.s); break;
      case GgufType::kU32: w.SetU32(k, static_cast<uint32_t>(v.u)); break;
      case GgufType::kI32: w.SetI32(k, static_cast<int32_t>(v.i)); break;
      case GgufType::kF32: w.SetF32(k, static_cast<float>(v.f)); break;
      case GgufType::kBool: w.SetBool(k, v.b); break;
      default: FAIL() << "key " << k << " of type " << GgufTypeName(v.type);
    }
  }
  for (const Image::Tensor& t : img.tensors) {
    const int64_t cols = t.shape.back();
    const std::vector<float>* d = &t.data;
    ASSERT_TRUE(w.AddTensor(t.name, DType::kF32, t.shape, [d, cols](int64_t r, float* out) {
                   std::memcpy(out, d->data() + r * cols, cols * sizeof(float));
                 }).ok());
  }
  ASSERT_TRUE(w.Write(path).ok());
}

class Deepseek2EditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = Config(kV3Json);
    weights_ = RandomWeights(c_, 5);
    img_ = Read(Write(dir_, c_, DType::kF32, "base.gguf", weights_));
  }
  StatusOr<std::unique_ptr<Checkpoint>> Open() {
    const std::string path = dir_ / "edited.gguf";
    WriteImage(img_, path);
    return OpenCheckpoint(path);
  }
  void ExpectError(StatusCode code, const std::vector<std::string>& parts) {
    auto ck = Open();
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), code) << ck.status().ToString();
    EXPECT_NE(ck.status().message().find("edited.gguf"), std::string::npos) << ck.status().message();
    for (const std::string& p : parts) {
      EXPECT_NE(ck.status().message().find(p), std::string::npos)
          << "'" << p << "' not in: " << ck.status().message();
    }
  }
  const WeightSource& Weight(const std::string& name) {
    for (const WeightSource& w : weights_) {
      if (w.name == name) return w;
    }
    ADD_FAILURE() << "no weight " << name;
    return weights_[0];
  }
  std::vector<float> Rows(const WeightSource& w) {
    std::vector<float> out;
    for (int64_t r = 0; r < w.shape[0]; ++r) {
      std::vector<float> row = SourceRow(w, r);
      out.insert(out.end(), row.begin(), row.end());
    }
    return out;
  }

  TempDir dir_;
  ModelConfig c_;
  std::vector<WeightSource> weights_;
  Image img_;
};

TEST_F(Deepseek2EditTest, LegacyAttnKvBFilesReadTheSame) {
  // Before llama.cpp split it, the converter wrote kv_b_proj whole, with
  // per-head key/value lengths and no *_mla keys.
  for (int l = 0; l < 3; ++l) {
    img_.Drop(fmt::format("blk.{}.attn_k_b.weight", l));
    img_.Drop(fmt::format("blk.{}.attn_v_b.weight", l));
    const WeightSource& kvb = Weight(fmt::format("model.layers.{}.self_attn.kv_b_proj.weight", l));
    img_.tensors.push_back({fmt::format("blk.{}.attn_kv_b.weight", l), kvb.shape, Rows(kvb)});
  }
  img_.kv.erase("deepseek2.attention.key_length_mla");
  img_.kv.erase("deepseek2.attention.value_length_mla");
  img_.SetU32("deepseek2.attention.key_length", 48);
  img_.SetU32("deepseek2.attention.value_length", 32);
  img_.SetU32("deepseek2.attention.head_count_kv", 2);
  auto ck = Open();
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ExpectSameConfig((*ck)->config(), c_);
  ExpectSameTensors(**ck, c_, weights_, DType::kF32);
}

TEST_F(Deepseek2EditTest, FusedGateUpExpertsSplitIntoGateAndUp) {
  // convert_hf_to_gguf.py --fuse-gate-up-exps: per expert, gate rows then up rows.
  for (int l = 1; l < 3; ++l) {
    Image::Tensor fused{fmt::format("blk.{}.ffn_gate_up_exps.weight", l), {4, 64, 64}, {}};
    for (int x = 0; x < 4; ++x) {
      for (const char* proj : {"gate_proj", "up_proj"}) {
        std::vector<float> rows =
            Rows(Weight(fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", l, x, proj)));
        fused.data.insert(fused.data.end(), rows.begin(), rows.end());
      }
    }
    img_.Drop(fmt::format("blk.{}.ffn_gate_exps.weight", l));
    img_.Drop(fmt::format("blk.{}.ffn_up_exps.weight", l));
    img_.tensors.push_back(std::move(fused));
  }
  auto ck = Open();
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ExpectSameTensors(**ck, c_, weights_, DType::kF32);
}

TEST_F(Deepseek2EditTest, MtpBlocksAreNotLayers) {
  img_.SetU32("deepseek2.block_count", 4);
  img_.SetU32("deepseek2.nextn_predict_layers", 1);
  img_.tensors.push_back({"blk.3.nextn.eh_proj.weight", {64, 128}, std::vector<float>(64 * 128)});
  img_.tensors.push_back({"blk.3.attn_k_b.weight", {2, 32, 32}, std::vector<float>(2048)});
  auto ck = Open();
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->config().n_layers, 3);
  EXPECT_TRUE((*ck)->Has("blk.3.nextn.eh_proj.weight"));
  EXPECT_TRUE((*ck)->Has("blk.3.attn_k_b.weight"));
}

TEST_F(Deepseek2EditTest, MissingMetadataIsNamed) {
  for (const char* key :
       {"deepseek2.attention.kv_lora_rank", "deepseek2.rope.dimension_count",
        "deepseek2.block_count", "deepseek2.attention.layer_norm_rms_epsilon",
        "deepseek2.expert_used_count", "deepseek2.expert_feed_forward_length",
        "deepseek2.expert_shared_count", "deepseek2.embedding_length"}) {
    SCOPED_TRACE(key);
    Image saved = img_;
    img_.kv.erase(key);
    ExpectError(StatusCode::kNotFound, {std::string("missing metadata key '") + key + "'"});
    img_ = saved;
  }
}

TEST_F(Deepseek2EditTest, WrongTypesAndContradictionsAreNamed) {
  GgufValue s;
  s.type = GgufType::kString;
  s.s = "four";
  img_.kv["deepseek2.expert_count"] = s;
  ExpectError(StatusCode::kInvalidArgument,
              {"key 'deepseek2.expert_count'", "expected an integer, found string"});
  img_.SetU32("deepseek2.expert_count", 4);

  img_.SetU32("deepseek2.attention.key_length", 50);
  ExpectError(StatusCode::kInvalidArgument,
              {"deepseek2.attention.key_length' = 50",
               "expected kv_lora_rank + rope.dimension_count = 48"});
  img_.SetU32("deepseek2.attention.key_length", 48);

  img_.SetU32("deepseek2.attention.head_count_kv", 2);
  ExpectError(StatusCode::kInvalidArgument, {"deepseek2.attention.head_count_kv' = 2", "expected 1"});
  img_.SetU32("deepseek2.attention.head_count_kv", 1);

  img_.SetU32("deepseek2.attention.key_length_mla", 16);
  ExpectError(StatusCode::kInvalidArgument,
              {"deepseek2.attention.key_length_mla' = 16",
               "expected more than rope.dimension_count (16)"});
  img_.SetU32("deepseek2.attention.key_length_mla", 48);

  img_.kv.erase("deepseek2.attention.value_length_mla");
  ExpectError(StatusCode::kInvalidArgument,
              {"deepseek2.attention.value_length_mla' = 0", "both *_mla keys or neither"});
  img_.SetU32("deepseek2.attention.value_length_mla", 32);

  img_.SetU32("deepseek2.expert_gating_func", 4);
  ExpectError(StatusCode::kInvalidArgument,
              {"deepseek2.expert_gating_func' = 4", "expected 1 (softmax) or 2 (sigmoid)"});
  img_.SetU32("deepseek2.expert_gating_func", 2);

  img_.SetU32("deepseek2.expert_used_count", 9);  // ModelConfig::Validate
  ExpectError(StatusCode::kInvalidArgument, {"deepseek2.expert_used_count = 9", "[1, 4]"});
  img_.SetU32("deepseek2.expert_used_count", 2);

  GgufValue yarn;
  yarn.type = GgufType::kString;
  yarn.s = "longrope";
  img_.kv["deepseek2.rope.scaling.type"] = yarn;
  ExpectError(StatusCode::kUnsupported, {"deepseek2.rope.scaling.type", "'longrope'"});
}

TEST_F(Deepseek2EditTest, MissingTensorsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"blk.1.ffn_up_exps.weight", "model.layers.1.mlp.experts.0.up_proj.weight"},
      {"blk.0.attn_q_a.weight", "model.layers.0.self_attn.q_a_proj.weight"},
      {"blk.2.exp_probs_b.bias", "model.layers.2.mlp.gate.e_score_correction_bias"},
      // deepseek2 never ties its head to the embedding: no silent fallback.
      {"output.weight", "lm_head.weight"},
  };
  for (const auto& [gguf, hf] : cases) {
    SCOPED_TRACE(gguf);
    Image saved = img_;
    img_.Drop(gguf);
    ExpectError(StatusCode::kNotFound, {"missing tensor '" + gguf + "'", hf});
    img_ = saved;
  }
  img_.Drop("blk.0.attn_v_b.weight");
  ExpectError(StatusCode::kNotFound,
              {"missing tensor 'blk.0.attn_v_b.weight'", "no 'blk.0.attn_kv_b.weight'"});
}

TEST_F(Deepseek2EditTest, ExpertTensorsMustHoldExpertCountExperts) {
  Image::Tensor* t = img_.Find("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(t, nullptr);
  t->shape = {3, 32, 64};
  t->data.resize(3 * 32 * 64);
  ExpectError(StatusCode::kCorruption,
              {"tensor 'blk.1.ffn_gate_exps.weight'", "4 experts (deepseek2.expert_count)",
               "found ne [64, 32, 3]"});
  t->shape = {4, 16, 64};
  t->data.resize(4 * 16 * 64);
  ExpectError(StatusCode::kCorruption, {"tensor 'blk.1.ffn_gate_exps.weight'",
                                        "expected ne [64, 32, 4]", "found [64, 16, 4]"});
  t->shape = {4 * 32, 64};
  t->data.resize(4 * 32 * 64);
  ExpectError(StatusCode::kCorruption, {"blk.1.ffn_gate_exps.weight", "3-D tensor of 4 experts"});
}

TEST_F(Deepseek2EditTest, ExpertTensorsInADenseLayerAreRejected) {
  img_.tensors.push_back({"blk.0.ffn_down_exps.weight", {4, 64, 32}, std::vector<float>(4 * 64 * 32)});
  ExpectError(StatusCode::kCorruption, {"blk.0.ffn_down_exps.weight", "layer 0 is dense"});
}

TEST_F(Deepseek2EditTest, WrongShapesAreNamed) {
  Image::Tensor* kb = img_.Find("blk.2.attn_k_b.weight");
  ASSERT_NE(kb, nullptr);
  kb->shape = {2, 32, 16};
  kb->data.resize(2 * 32 * 16);
  ExpectError(StatusCode::kCorruption,
              {"tensor 'blk.2.attn_k_b.weight'", "expected ne [32, 32, 2]", "found [16, 32, 2]"});
  kb->shape = {2, 32, 32};
  kb->data.resize(2 * 32 * 32);
  Image::Tensor* q = img_.Find("blk.0.attn_q_a.weight");
  ASSERT_NE(q, nullptr);
  q->shape = {31, 64};
  q->data.resize(31 * 64);
  ExpectError(StatusCode::kCorruption, {"tensor 'blk.0.attn_q_a.weight'",
                                        "model.layers.0.self_attn.q_a_proj.weight",
                                        "expected ne [64, 32]", "found [64, 31]"});
}

// Shared-expert tensors in a file whose metadata says there are none: the
// count is wrong or the tensors are, so the file is refused naming both.
TEST_F(Deepseek2EditTest, SharedExpertTensorsNeedASharedExpertCount) {
  img_.SetU32("deepseek2.expert_shared_count", 0);
  ExpectError(StatusCode::kCorruption, {"_shexp.weight", "expert_shared_count is 0"});
}

TEST(Deepseek2NamesTest, OneToOneNamesInvert) {
  for (const char* g : {"token_embd.weight", "output_norm.weight", "output.weight",
                        "blk.7.attn_q_a.weight", "blk.7.attn_kv_a_mqa.weight",
                        "blk.7.exp_probs_b.bias", "blk.7.ffn_gate_inp.weight",
                        "blk.7.ffn_down_shexp.weight", "blk.7.attn_kv_b.weight"}) {
    const std::string hf = Deepseek2GgufToHfName(g);
    EXPECT_FALSE(hf.empty()) << g;
    EXPECT_EQ(Deepseek2HfToGgufName(hf), g);
  }
  EXPECT_EQ(Deepseek2GgufToHfName("blk.7.exp_probs_b.bias"),
            "model.layers.7.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(Deepseek2GgufToHfName("blk.7.ffn_gate_exps.weight"), "");
  EXPECT_EQ(Deepseek2GgufToHfName("blk.7.attn_k_b.weight"), "");
  EXPECT_EQ(Deepseek2HfToGgufName("model.layers.7.mlp.experts.3.up_proj.weight"), "");
}

}  // namespace
}  // namespace specd
