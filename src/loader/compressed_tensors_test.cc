// compressed-tensors configs and pack-quantized INT4 triples: what the loader
// accepts, how a triple becomes Q4_BF16 (checked against the library's own
// unpacking, a golden made by tests/python/compressed_tensors/make_goldens.py),
// and a clear error for every malformed triple.
#include "loader/compressed_tensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/test_reference.h"
#include "loader/safetensors_reader.h"
#include "tensor/dtype.h"

namespace specd {
namespace {

using json = nlohmann::json;

// The quantization_config compressed-tensors 0.20.1 writes for W4A16 group 32
// (ModelCompressor.update_config), routed experts only.
json KimiStyleConfig() {
  return json::parse(R"({
    "quantization_config": {
      "config_groups": {"group_0": {
        "format": "pack-quantized", "input_activations": null, "output_activations": null,
        "targets": ["Linear"],
        "weights": {"dynamic": false, "group_size": 32, "num_bits": 4, "strategy": "group",
                    "symmetric": true, "type": "int", "actorder": null, "observer": "minmax",
                    "observer_kwargs": {}, "block_structure": null}}},
      "format": "pack-quantized", "global_compression_ratio": null,
      "ignore": ["lm_head", "re:.*self_attn.*"], "kv_cache_scheme": null,
      "quant_method": "compressed-tensors", "quantization_status": "compressed",
      "sparsity_config": {}, "transform_config": {}, "version": "0.20.1"},
    "architectures": ["DeepseekV3ForCausalLM"]})");
}

StatusOr<WeightQuantization> Parse(const json& j) {
  return ParseQuantizationConfig(j.dump(), "m/config.json");
}

void ExpectUnsupported(const json& j, const std::string& message) {
  auto r = Parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_EQ(r.status().message(), message);
}

TEST(CompressedTensorsConfigTest, AcceptsW4A16Group32) {
  EXPECT_EQ(Parse(json::parse(R"({"architectures": ["X"]})")).value(), WeightQuantization::kNone);
  EXPECT_EQ(Parse(KimiStyleConfig()).value(), WeightQuantization::kPackQuantizedInt4);
  // Kimi-K2.5 keeps the text model's keys under text_config.
  json nested = {{"text_config", KimiStyleConfig()}};
  EXPECT_EQ(Parse(nested).value(), WeightQuantization::kPackQuantizedInt4);
  // Optional fields the library omits when unset.
  json j = KimiStyleConfig();
  auto& w = j["quantization_config"]["config_groups"]["group_0"]["weights"];
  w.erase("actorder");
  w.erase("observer");
  w.erase("block_structure");
  j["quantization_config"]["config_groups"]["group_0"].erase("format");
  EXPECT_EQ(Parse(j).value(), WeightQuantization::kPackQuantizedInt4);
}

TEST(CompressedTensorsConfigTest, RejectsEveryOtherSchemeNamingTheField) {
  const std::string w = "m/config.json: quantization_config.config_groups.group_0.weights.";
  struct Case {
    const char* key;
    json value;
    std::string message;
  };
  const Case cases[] = {
      {"num_bits", 8, w + "num_bits = 8: supported: 4"},
      {"type", "float", w + "type = \"float\": supported: \"int\""},
      {"symmetric", false, w + "symmetric = false: supported: true"},
      {"strategy", "channel", w + "strategy = \"channel\": supported: \"group\""},
      {"group_size", 128, w + "group_size = 128: supported: 32"},
      {"dynamic", true, w + "dynamic = true: supported: false"},
      {"actorder", "weight", w + "actorder = \"weight\": supported: null"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    json j = KimiStyleConfig();
    j["quantization_config"]["config_groups"]["group_0"]["weights"][c.key] = c.value;
    ExpectUnsupported(j, c.message);
  }
  json j = KimiStyleConfig();
  j["quantization_config"]["format"] = "naive-quantized";
  ExpectUnsupported(j, "m/config.json: quantization_config.format = \"naive-quantized\": "
                       "supported: \"pack-quantized\"");
  j = KimiStyleConfig();
  j["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}};
  ExpectUnsupported(j, "m/config.json: quantization_config.config_groups.group_0."
                       "input_activations = {\"num_bits\":8}: supported: null (W4A16: f32 "
                       "activations)");
  j = KimiStyleConfig();
  j["quantization_config"]["quant_method"] = "awq";
  ExpectUnsupported(j, "m/config.json: quantization_config.quant_method = \"awq\": supported: "
                       "\"compressed-tensors\"");
  j = KimiStyleConfig();
  j["quantization_config"]["config_groups"]["group_0"]["weights"].erase("num_bits");
  ExpectUnsupported(j, w.substr(0, w.size() - 1) + ".num_bits is missing: supported: 4");
}

TEST(CompressedTensorsConfigTest, Fp8CheckpointsPointToTheBf16Conversion) {
  // DeepSeek-V3's official release.
  json j = json::parse(R"({"quantization_config": {"activation_scheme": "dynamic",
      "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}})");
  ExpectUnsupported(j, "m/config.json: quantization_config.quant_method = \"fp8\": FP8 "
                       "block-quantized checkpoints are not supported; convert them to BF16 "
                       "first (DeepSeek-V3's inference/fp8_cast_bf16.py)");
  auto dt = SafetensorsDType("F8_E4M3", "model.layers.0.mlp.down_proj.weight", "m/a.safetensors");
  ASSERT_FALSE(dt.ok());
  EXPECT_EQ(dt.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(dt.status().message().find("model.layers.0.mlp.down_proj.weight"), std::string::npos);
  EXPECT_NE(dt.status().message().find("fp8_cast_bf16.py"), std::string::npos);
}

// ------------------------------------------------------------ triples

// Tensors of one layer held in memory for UnpackInt4Triples.
struct Triple {
  std::vector<int32_t> packed;
  std::vector<uint16_t> scale;
  std::vector<int64_t> shape;
  std::map<std::string, TensorView> tensors;

  // q: (out, in) values in [-8, 7]; packed as compressed-tensors does (see
  // compressed_tensors.h), independently of the loader's repacking.
  Triple(const std::string& base, int64_t out, int64_t in, const std::vector<int>& q,
         const std::vector<float>& scales) {
    packed.assign(static_cast<size_t>(out * in / 8), 0);
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t j = 0; j < in; ++j) {
        const uint32_t nib = static_cast<uint32_t>(q[r * in + j] + 8);
        packed[r * in / 8 + j / 8] |= static_cast<int32_t>(nib << (4 * (j % 8)));
      }
    }
    for (float s : scales) scale.push_back(F32ToBF16(s));
    shape = {out, in};
    Add(base + ".weight_packed", DType::kI32, {out, in / 8}, packed.data(), packed.size() * 4);
    Add(base + ".weight_scale", DType::kBF16, {out, in / 32}, scale.data(), scale.size() * 2);
    Add(base + ".weight_shape", DType::kI64, {2}, shape.data(), 16);
  }
  void Add(const std::string& name, DType dt, std::vector<int64_t> s, const void* data,
           size_t nbytes) {
    TensorView t;
    t.name = name;
    t.dtype = dt;
    t.shape = std::move(s);
    t.data = data;
    t.nbytes = nbytes;
    tensors[name] = t;
  }
};

Status Unpack(std::map<std::string, TensorView>* tensors,
              std::vector<std::vector<uint8_t>>* buffers,
              WeightQuantization q = WeightQuantization::kPackQuantizedInt4) {
  return UnpackInt4Triples(q, "m", tensors, buffers, nullptr);
}

TEST(CompressedTensorsTripleTest, BecomesQ4Bf16) {
  const int64_t out = 3, in = 64;
  std::vector<int> q(out * in);
  for (int64_t i = 0; i < out * in; ++i) q[i] = static_cast<int>((i * 7 + i / 5) % 16) - 8;
  const std::vector<float> scales = {0.5f, 0.25f, 1.5f, 0.0078125f, 3.f, 0.125f};
  Triple t("model.layers.1.mlp.experts.0.up_proj", out, in, q, scales);
  t.tensors["model.norm.weight"] = TensorView{"model.norm.weight", DType::kF32, {4}, nullptr, 16};
  std::vector<std::vector<uint8_t>> buffers;
  int n = 0;
  ASSERT_TRUE(UnpackInt4Triples(WeightQuantization::kPackQuantizedInt4, "m", &t.tensors, &buffers,
                                &n)
                  .ok());
  EXPECT_EQ(n, 1);
  ASSERT_EQ(t.tensors.size(), 2u);
  const TensorView& w = t.tensors.at("model.layers.1.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(w.dtype, DType::kQ4_BF16);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{out, in}));
  EXPECT_EQ(w.nbytes, static_cast<size_t>(out * 2 * 18));
  std::vector<float> row(in);
  for (int64_t r = 0; r < out; ++r) {
    DequantizeRow(w.dtype, w.row(r), row.data(), in);
    for (int64_t j = 0; j < in; ++j) {
      ASSERT_EQ(row[j], scales[r * 2 + j / 32] * q[r * in + j]) << "r=" << r << " j=" << j;
    }
  }
}

// The library's own packing and dequantization of a small weight (golden).
TEST(CompressedTensorsTripleTest, MatchesTheLibraryUnpacking) {
  const std::string path =
      std::string(SPECD_SOURCE_DIR) + "/tests/python/compressed_tensors/unpack_golden.json";
  std::ifstream f(path);
  if (!f) {
    SPECD_REFERENCE_MISSING(path << " is missing: run tests/python/compressed_tensors/"
                                    "make_goldens.py with .venv-golden");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const json g = json::parse(ss.str());
  const int64_t out = g["shape"][0], in = g["shape"][1];
  std::vector<int32_t> packed = g["packed_int32"].get<std::vector<int32_t>>();
  std::vector<uint16_t> scale = g["scale_bf16_bits"].get<std::vector<uint16_t>>();
  std::vector<int64_t> shape = {out, in};
  const std::vector<float> want = g["dequantized_f32"].get<std::vector<float>>();
  Triple t("x", 1, 32, std::vector<int>(32, 0), {1.f});
  t.Add("x.weight_packed", DType::kI32, {out, in / 8}, packed.data(), packed.size() * 4);
  t.Add("x.weight_scale", DType::kBF16, {out, in / 32}, scale.data(), scale.size() * 2);
  t.Add("x.weight_shape", DType::kI64, {2}, shape.data(), 16);
  std::vector<std::vector<uint8_t>> buffers;
  ASSERT_TRUE(Unpack(&t.tensors, &buffers).ok());
  const TensorView& w = t.tensors.at("x.weight");
  std::vector<float> row(in);
  for (int64_t r = 0; r < out; ++r) {
    DequantizeRow(w.dtype, w.row(r), row.data(), in);
    for (int64_t j = 0; j < in; ++j) ASSERT_EQ(row[j], want[r * in + j]) << r << "," << j;
  }
}

TEST(CompressedTensorsTripleTest, ScalesConvertOnlyWhenExactInBf16) {
  std::vector<int> q(32, 3);
  Triple t("x", 1, 32, q, {1.f});
  std::vector<float> f32 = {0.375f};
  t.Add("x.weight_scale", DType::kF32, {1, 1}, f32.data(), 4);
  std::vector<std::vector<uint8_t>> buffers;
  ASSERT_TRUE(Unpack(&t.tensors, &buffers).ok());
  float y[32];
  DequantizeRow(DType::kQ4_BF16, t.tensors.at("x.weight").data, y, 32);
  EXPECT_EQ(y[0], 1.125f);

  Triple u("x", 1, 32, q, {1.f});
  std::vector<uint16_t> f16 = {F32ToF16(0.1f)};  // 0.0999755859375: 11 significant bits
  u.Add("x.weight_scale", DType::kF16, {1, 1}, f16.data(), 2);
  Status st = Unpack(&u.tensors, &buffers);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'x.weight_scale': scale [0, 0] = 0.099975586 is not exact in bf16"),
            std::string::npos)
      << st.message();
}

void ExpectTripleError(std::map<std::string, TensorView> tensors, const std::string& part,
                       WeightQuantization q = WeightQuantization::kPackQuantizedInt4) {
  std::vector<std::vector<uint8_t>> buffers;
  Status st = Unpack(&tensors, &buffers, q);
  ASSERT_FALSE(st.ok()) << part;
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  EXPECT_EQ(st.message().rfind("m: ", 0), 0u) << st.message();
}

TEST(CompressedTensorsTripleTest, EveryMalformedTripleNamesTheTensor) {
  const std::vector<int> q(2 * 64, 1);
  const std::vector<float> s(4, 1.f);
  {  // each member missing
    for (const char* member : {".weight_packed", ".weight_scale", ".weight_shape"}) {
      Triple t("e", 2, 64, q, s);
      t.tensors.erase(std::string("e") + member);
      ExpectTripleError(t.tensors, std::string("tensor 'e") + member + "' is missing");
    }
  }
  {  // packed size disagrees with weight_shape: never read past its end
    Triple t("e", 2, 64, q, s);
    t.tensors["e.weight_packed"].shape = {2, 4};
    t.tensors["e.weight_packed"].nbytes = 32;
    ExpectTripleError(t.tensors, "tensor 'e.weight_packed': expected I32 [2, 8] (weight_shape "
                                 "[2, 64] at 4 bits), found I32 [2, 4]");
  }
  {  // in not a multiple of 32
    Triple t("e", 2, 64, q, s);
    t.shape[1] = 48;
    ExpectTripleError(t.tensors, "in_features 48 is not a multiple of the group size 32");
  }
  {  // scale shape
    Triple t("e", 2, 64, q, s);
    t.tensors["e.weight_scale"].shape = {2, 1};
    ExpectTripleError(t.tensors, "tensor 'e.weight_scale': expected BF16 (or F16/F32) [2, 2] "
                                 "(weight_shape [2, 64], group 32), found BF16 [2, 1]");
  }
  {  // weight_shape: not 2 positive ints
    Triple t("e", 2, 64, q, s);
    t.shape[0] = -2;
    ExpectTripleError(t.tensors, "tensor 'e.weight_shape': expected 2 positive integers [out, "
                                 "in] (I32 or I64, shape [2]), found [-2, 64]");
    Triple u("e", 2, 64, q, s);
    u.tensors["e.weight_shape"].shape = {3};
    ExpectTripleError(u.tensors, "found I64 [3]");
    Triple v("e", 2, 64, q, s);
    v.tensors["e.weight_shape"].dtype = DType::kF32;
    v.tensors["e.weight_shape"].nbytes = 8;
    ExpectTripleError(v.tensors, "found F32 [2]");
  }
  {  // the dense weight beside its packed form
    Triple t("e", 2, 64, q, s);
    t.tensors["e.weight"] = TensorView{"e.weight", DType::kBF16, {2, 64}, nullptr, 256};
    ExpectTripleError(t.tensors, "tensor 'e.weight' is present beside its packed form");
  }
  {  // asymmetric
    Triple t("e", 2, 64, q, s);
    t.tensors["e.weight_zero_point"] = TensorView{"e.weight_zero_point", DType::kI32, {1, 2}, nullptr, 8};
    ExpectTripleError(t.tensors, "tensor 'e.weight_zero_point': asymmetric zero points");
  }
  {  // no quantization_config
    Triple t("e", 2, 64, q, s);
    ExpectTripleError(t.tensors, "tensor 'e.weight_packed' is a compressed-tensors packed weight, "
                                 "but config.json has no quantization_config",
                      WeightQuantization::kNone);
  }
}

}  // namespace
}  // namespace specd
