// specd's deepseek2 GGUF writer against llama.cpp's own converter: the same
// HF checkpoints (tests/python/deepseek2_gguf_golden.py: config.json plus
// formula weights) must give the same deepseek2.* metadata and the same
// tensors, byte for byte, as convert_hf_to_gguf.py of llama.cpp b11312 at
// F16 and Q8_0. The one deliberate difference: attention.q_lora_rank = 0 for
// a plain q_proj (gguf_deepseek2_writer.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/gguf_reader.h"
#include "loader/test_util.h"
#include "loader/weight_names.h"
#include "modelgen/fixture.h"
#include "modelgen/gguf_deepseek2_writer.h"

namespace specd {
namespace {

using testing_util::RowOf;
using testing_util::TempDir;

uint32_t Fnv1a32(const std::string& s) {
  uint32_t h = 0x811C9DC5u;
  for (unsigned char b : s) h = (h ^ b) * 0x01000193u;
  return h;
}

std::string Fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

// The golden script's weights: element i (row-major) of tensor `name`.
float FormulaValue(uint32_t seed, uint64_t i) {
  uint32_t h = seed + static_cast<uint32_t>(i) * 0x9E3779B1u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return (static_cast<float>(h >> 22) - 512.f) / 4096.f;
}

std::vector<WeightSource> FormulaWeights(const ModelConfig& c) {
  std::vector<WeightSource> out;
  for (const TensorSpec& spec : ExpectedTensors(c)) {
    const uint32_t seed = Fnv1a32(spec.name);
    const int64_t cols = spec.shape.back();
    out.push_back({spec.name, spec.shape, [seed, cols](int64_t r, float* dst) {
                     for (int64_t j = 0; j < cols; ++j) {
                       dst[j] = FormulaValue(seed, static_cast<uint64_t>(r * cols + j));
                     }
                   }});
  }
  return out;
}

// gguf-py's GGUFValueType names.
const char* PyTypeName(GgufType t) {
  switch (t) {
    case GgufType::kU32: return "UINT32";
    case GgufType::kI32: return "INT32";
    case GgufType::kF32: return "FLOAT32";
    case GgufType::kBool: return "BOOL";
    case GgufType::kString: return "STRING";
    case GgufType::kU64: return "UINT64";
    default: return "?";
  }
}

void ExpectValue(const GgufValue& v, const nlohmann::json& want, const std::string& key) {
  SCOPED_TRACE(key);
  ASSERT_EQ(PyTypeName(v.type), want["type"].get<std::string>());
  const nlohmann::json& x = want["value"];
  switch (v.type) {
    case GgufType::kU32: EXPECT_EQ(v.u, x.get<uint64_t>()); break;
    case GgufType::kF32: EXPECT_FLOAT_EQ(static_cast<float>(v.f), x.get<float>()); break;
    case GgufType::kBool: EXPECT_EQ(v.b, x.get<bool>()); break;
    case GgufType::kString: EXPECT_EQ(v.s, x.get<std::string>()); break;
    default: ADD_FAILURE() << "unexpected type";
  }
}

nlohmann::json Golden() {
  auto text = ReadFileToString(std::string(SPECD_SOURCE_DIR) +
                               "/tests/python/deepseek2_gguf_golden.json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json::object();
}

struct GoldenCase {
  const char* name;  // "v3" | "v2lite"
  const char* file;  // "f16" | "q8_0"
};

class Deepseek2ConverterGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Deepseek2ConverterGoldenTest, SameMetadataAndTensorBytesAsConvertHfToGguf) {
  const nlohmann::json golden = Golden();
  const nlohmann::json& gcase = golden["cases"][GetParam().name];
  ASSERT_TRUE(gcase.is_object());
  auto c = ParseHfConfig(gcase["config_json"].get<std::string>(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string ftype = GetParam().file;
  TempDir dir;
  GgufModelOptions o;
  o.dtype = ftype == "f16" ? DType::kF16 : DType::kQ8_0;
  const std::string path = dir / "m.gguf";
  Status s = WriteDeepseek2Gguf(*c, FormulaWeights(*c), o, path);
  ASSERT_TRUE(s.ok()) << s.ToString();

  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  const auto* data = reinterpret_cast<const uint8_t*>(bytes->data());
  auto f = ParseGguf(data, bytes->size(), path, true);
  ASSERT_TRUE(f.ok()) << f.status().ToString();

  const nlohmann::json& want = gcase["files"][ftype];
  for (const auto& [key, v] : want["kv"].items()) {
    auto it = f->kv.find(key);
    if (it == f->kv.end()) {
      ADD_FAILURE() << "missing key " << key;
      continue;
    }
    ExpectValue(it->second, v, key);
  }
  for (const auto& [key, v] : f->kv) {
    if (key.rfind("deepseek2.", 0) != 0 || want["kv"].contains(key)) continue;
    // Written for llama.cpp to load a plain-q_proj model of any depth.
    EXPECT_TRUE(key == "deepseek2.attention.q_lora_rank" && v.u == 0) << "extra key " << key;
  }

  std::map<std::string, const GgufTensorInfo*> ours;
  for (const GgufTensorInfo& ti : f->tensors) ours[ti.name] = &ti;
  // For a tied config the converter writes no output.weight; this writer
  // writes a copy of token_embd (deepseek2 readers require the tensor).
  if (c->tie_embeddings) {
    ASSERT_TRUE(ours.count("output.weight") && ours.count("token_embd.weight"));
    const GgufTensorInfo& out = *ours["output.weight"];
    const GgufTensorInfo& embd = *ours["token_embd.weight"];
    EXPECT_EQ(out.ne, embd.ne);
    EXPECT_EQ(out.ggml_type, embd.ggml_type);
    EXPECT_EQ(Fnv1a64(data + f->data_offset + out.offset, out.nbytes),
              Fnv1a64(data + f->data_offset + embd.offset, embd.nbytes));
    ours.erase("output.weight");
  }
  EXPECT_EQ(ours.size(), want["tensors"].size());
  for (const nlohmann::json& t : want["tensors"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    auto it = ours.find(name);
    if (it == ours.end()) {
      ADD_FAILURE() << "missing tensor";
      continue;
    }
    const GgufTensorInfo& ti = *it->second;
    EXPECT_EQ(ti.ne, t["ne"].get<std::vector<int64_t>>());
    EXPECT_EQ(GgmlTypeName(ti.ggml_type), t["type"].get<std::string>());
    EXPECT_EQ(Fnv1a64(data + f->data_offset + ti.offset, ti.nbytes), t["fnv1a64"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(All, Deepseek2ConverterGoldenTest,
                         ::testing::Values(GoldenCase{"v3", "f16"}, GoldenCase{"v3", "q8_0"},
                                           GoldenCase{"v2lite", "f16"},
                                           GoldenCase{"v2lite", "q8_0"}),
                         [](const auto& info) {
                           return std::string(info.param.name) + "_" + info.param.file;
                         });

class Deepseek2WriterErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const nlohmann::json golden = Golden();
    auto c = ParseHfConfig(golden["cases"]["v3"]["config_json"].get<std::string>(), "config.json");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    c_ = *c;
    weights_ = FormulaWeights(c_);
  }
  Status Write() { return WriteDeepseek2Gguf(c_, weights_, GgufModelOptions{}, dir_ / "m.gguf"); }

  TempDir dir_;
  ModelConfig c_;
  std::vector<WeightSource> weights_;
};

void ExpectStatus(const Status& s, StatusCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

TEST_F(Deepseek2WriterErrorTest, WhatDeepseek2CannotHoldIsRefused) {
  c_.moe.layer_freq = 2;
  ExpectStatus(Write(), StatusCode::kUnsupported, {"moe_layer_freq = 2", "expected 1"});
  c_.moe.layer_freq = 1;
  c_.rope_style = RopeStyle::kHalf;
  ExpectStatus(Write(), StatusCode::kUnsupported, {"rope_interleave = false"});
}

TEST_F(Deepseek2WriterErrorTest, MissingAndMisshapenWeightsAreNamed) {
  std::erase_if(weights_, [](const WeightSource& w) {
    return w.name == "model.layers.2.mlp.experts.3.down_proj.weight";
  });
  ExpectStatus(Write(), StatusCode::kNotFound,
               {"missing weight 'model.layers.2.mlp.experts.3.down_proj.weight'", "[64, 32]"});
  weights_ = FormulaWeights(c_);
  for (WeightSource& w : weights_) {
    if (w.name == "model.layers.0.self_attn.kv_b_proj.weight") w.shape = {128, 31};
  }
  ExpectStatus(Write(), StatusCode::kInvalidArgument,
               {"'model.layers.0.self_attn.kv_b_proj.weight'", "expected shape [128, 32]",
                "found [128, 31]"});
}


// ---- make-model / quantize ----

// What a row stored as `dt` reads back as.
std::vector<float> Stored(DType dt, std::vector<float> v) {
  std::vector<uint8_t> buf(RowBytes(dt, static_cast<int64_t>(v.size())));
  QuantizeRow(dt, v.data(), buf.data(), static_cast<int64_t>(v.size()));
  DequantizeRow(dt, buf.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// The writer's type policy (gguf_deepseek2_writer.h).
DType Policy(DType dt, const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.size() < 2 || name.ends_with(".mlp.gate.weight")) return DType::kF32;
  if (IsQuantized(dt) && shape.back() % kQuantBlock != 0) return DType::kF16;
  return dt;
}

// Every weight of `weights` (names without `prefix`) in `ck` as the policy
// stores it; kv_b_proj (rebuilt across attn_k_b's rows, checked in
// loader/gguf_deepseek2_test.cc) only for its shape and F32 type.
void ExpectStoredWeights(const Checkpoint& ck, const std::vector<WeightSource>& weights,
                         const std::string& prefix, DType dt) {
  int checked = 0;
  for (const WeightSource& w : weights) {
    if (w.name.compare(0, prefix.size(), prefix) != 0) continue;  // a vision tower
    const std::string name = w.name.substr(prefix.size());
    SCOPED_TRACE(name);
    auto t = ck.Get(name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_EQ(t->shape, w.shape);
    if (name.ends_with(".kv_b_proj.weight")) {
      EXPECT_EQ(t->dtype, IsQuantized(dt) ? DType::kF32 : dt);
      continue;
    }
    const DType sdt = Policy(dt, name, w.shape);
    ASSERT_EQ(t->dtype, sdt);
    std::vector<float> row(static_cast<size_t>(w.shape.back()));
    for (int64_t r = 0; r < t->rows(); ++r) {
      w.rows(r, row.data());
      ASSERT_EQ(RowOf(*t, r), Stored(sdt, row)) << "row " << r;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

class Deepseek2MakeModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Deepseek2MakeModelTest, GgufQ4_0ReadsBackThePresetAndItsWeights) {
  auto want = FixturePreset(GetParam());
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  TempDir dir;
  FixtureOptions o;
  o.preset = GetParam();
  o.format = "gguf";
  o.dtype = DType::kQ4_0;
  o.vocab = "synthetic";
  o.out = dir / "m.gguf";
  Status st = MakeFixture(o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto ck = OpenCheckpoint(o.out);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, want->arch);
  EXPECT_EQ(c.n_layers, want->n_layers);
  EXPECT_EQ(c.hidden_dim, want->hidden_dim);
  EXPECT_EQ(c.vocab_size, want->vocab_size);
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.mla.q_lora_rank, want->mla.q_lora_rank);
  EXPECT_EQ(c.mla.qk_nope_head_dim, want->mla.qk_nope_head_dim);
  EXPECT_EQ(c.mla.v_head_dim, want->mla.v_head_dim);
  EXPECT_EQ(c.moe.n_routed_experts, want->moe.n_routed_experts);
  EXPECT_EQ(c.moe.topk_method, want->moe.topk_method);
  EXPECT_EQ(c.moe.n_group, want->moe.n_group);
  EXPECT_EQ(c.moe.routed_scaling_factor, want->moe.routed_scaling_factor);
  EXPECT_EQ(c.rope_scaling.type, want->rope_scaling.type);
  EXPECT_EQ(c.rope_scaling.factor, want->rope_scaling.factor);
  EXPECT_EQ(c.bos_id, want->bos_id);
  EXPECT_EQ(c.eos_ids, want->eos_ids);
  EXPECT_EQ((*ck)->gguf_vocab().tokens.size(), static_cast<size_t>(want->vocab_size));
  ExpectStoredWeights(**ck, RandomWeights(*want, 0), want->tensor_prefix, DType::kQ4_0);
}

INSTANTIATE_TEST_SUITE_P(Presets, Deepseek2MakeModelTest,
                         ::testing::Values("deepseek-v3-tiny", "kimi-k2-tiny", "kimi-k25-tiny",
                                           "moonlight-tiny", "deepseek-v2-lite-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(Deepseek2QuantizeTest, SafetensorsCheckpointToQ8_0Gguf) {
  // specd quantize: a DeepSeek safetensors folder -> WeightsFromCheckpoint ->
  // WriteGgufModel; the GGUF holds the folder's values at Q8_0.
  TempDir dir;
  FixtureOptions o;
  o.preset = "moonlight-tiny";
  o.dtype = DType::kF32;
  o.out = dir / "hf";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto st = OpenCheckpoint(o.out);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto weights = WeightsFromCheckpoint(**st);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  GgufModelOptions go;
  go.dtype = DType::kQ8_0;
  ASSERT_TRUE(WriteGgufModel((*st)->config(), *weights, go, dir / "m.gguf").ok());
  auto gg = OpenCheckpoint(dir / "m.gguf");
  ASSERT_TRUE(gg.ok()) << gg.status().ToString();
  EXPECT_EQ((*gg)->config().arch, (*st)->config().arch);
  ExpectStoredWeights(**gg, *weights, "", DType::kQ8_0);
}

}  // namespace
}  // namespace specd
