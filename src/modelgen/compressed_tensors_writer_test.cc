// WriteCompressedTensorsModel on the Llama "tiny" fixture: which tensors are
// quantized (the library's matching rules), that everything else is copied
// byte for byte, that the loader reads the result back as Q4_BF16 with the
// values of tensor/dtype.h's quantizer, sharded folders, side files, and a
// clear error for every bad input. Byte identity with compressed-tensors
// itself is tests/compressed_tensors_golden_test.cc.
#include "modelgen/compressed_tensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/safetensors_reader.h"
#include "loader/test_util.h"
#include "modelgen/fixture.h"
#include "modelgen/safetensors_writer.h"

namespace specd {
namespace {

using json = nlohmann::json;
using testing_util::TempDir;

// Everything but the embeddings and the LM head: attention and MLP weights.
const std::vector<std::string> kAllLinears = {"re:.*lm_head$", "re:.*embed_tokens$"};

std::string MakeTiny(const TempDir& tmp, DType dtype = DType::kBF16) {
  FixtureOptions o;
  o.preset = "tiny";
  o.dtype = dtype;
  o.seed = 3;
  o.out = tmp / "model";
  EXPECT_TRUE(MakeFixture(o).ok());
  return o.out;
}

// name -> view of a safetensors file (kept mapped by `files`).
std::map<std::string, TensorView> ReadTensors(const std::string& path,
                                              std::vector<std::unique_ptr<MappedFile>>* files) {
  auto mf = MappedFile::Open(path, MapOptions{});
  EXPECT_TRUE(mf.ok()) << mf.status().ToString();
  if (!mf.ok()) return {};
  auto views = ParseSafetensors((*mf)->data(), (*mf)->size(), path);
  EXPECT_TRUE(views.ok()) << views.status().ToString();
  files->push_back(std::move(*mf));
  std::map<std::string, TensorView> out;
  if (views.ok()) {
    for (TensorView& v : *views) out[v.name] = v;
  }
  return out;
}

bool SameBytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes &&
         std::memcmp(a.data, b.data, a.nbytes) == 0;
}

Status Write(const std::string& in, const std::string& out, std::vector<std::string> ignore,
             int* n = nullptr) {
  CompressedTensorsOptions o;
  o.ignore = std::move(ignore);
  o.threads = 3;  // several row ranges per matrix
  return WriteCompressedTensorsModel(in, out, o, n);
}

TEST(CompressedTensorsWriterTest, QuantizesTargetedLinearsAndCopiesTheRest) {
  TempDir tmp;
  const std::string in = MakeTiny(tmp), out = tmp / "int4";
  int n = 0;
  ASSERT_TRUE(Write(in, out, kAllLinears, &n).ok());
  std::vector<std::unique_ptr<MappedFile>> files;
  auto src = ReadTensors(in + "/model.safetensors", &files);
  auto dst = ReadTensors(out + "/model.safetensors", &files);
  int quantized = 0;
  for (const auto& [name, t] : src) {
    const bool linear = name.find("_proj.weight") != std::string::npos;
    if (!linear) {
      ASSERT_TRUE(dst.count(name)) << name;
      EXPECT_TRUE(SameBytes(t, dst.at(name))) << name << " changed";
      continue;
    }
    ++quantized;
    const std::string base = name.substr(0, name.size() - 7);
    EXPECT_EQ(dst.count(name), 0u) << name;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    ASSERT_TRUE(dst.count(base + ".weight_packed")) << base;
    const TensorView& packed = dst.at(base + ".weight_packed");
    const TensorView& scale = dst.at(base + ".weight_scale");
    const TensorView& shape = dst.at(base + ".weight_shape");
    EXPECT_EQ(packed.dtype, DType::kI32);
    EXPECT_EQ(packed.shape, (std::vector<int64_t>{rows, cols / 8}));
    EXPECT_EQ(scale.dtype, DType::kBF16);
    EXPECT_EQ(scale.shape, (std::vector<int64_t>{rows, cols / 32}));
    EXPECT_EQ(shape.dtype, DType::kI64);
    int64_t dims[2];
    std::memcpy(dims, shape.data, 16);
    EXPECT_EQ(dims[0], rows);
    EXPECT_EQ(dims[1], cols);
    // The packed nibbles and scales against tensor/dtype.h's quantizer, read
    // as compressed-tensors' layout (element j at bits 4 (j % 8) of word j / 8).
    std::vector<BlockQ4_BF16> blocks(static_cast<size_t>(cols / 32));
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeRowQ4_BF16(reinterpret_cast<const uint16_t*>(t.row(r)), blocks.data(), cols);
      const auto* words = static_cast<const uint32_t*>(packed.data) + r * cols / 8;
      const auto* scales = static_cast<const uint16_t*>(scale.data) + r * cols / 32;
      for (int64_t j = 0; j < cols; ++j) {
        const BlockQ4_BF16& b = blocks[j / 32];
        const int i = static_cast<int>(j % 32);
        const uint32_t want = i < 16 ? b.qs[i] & 0xf : b.qs[i - 16] >> 4;
        ASSERT_EQ((words[j / 8] >> (4 * (j % 8))) & 0xf, want) << name << " [" << r << ", " << j << "]";
      }
      for (int64_t g = 0; g < cols / 32; ++g) ASSERT_EQ(scales[g], blocks[g].d);
    }
  }
  EXPECT_EQ(quantized, 14);  // 2 layers x (q, k, v, o, gate, up, down)
  EXPECT_EQ(n, quantized);
  EXPECT_EQ(dst.size(), src.size() + 2 * static_cast<size_t>(quantized));

  auto config = ReadFileToString(out + "/config.json");
  ASSERT_TRUE(config.ok());
  const json qc = json::parse(*config)["quantization_config"];
  EXPECT_EQ(qc, json::parse(CompressedTensorsQuantizationConfig(kAllLinears)));
  EXPECT_EQ(qc["ignore"], json(kAllLinears));
  EXPECT_EQ(qc["config_groups"]["group_0"]["weights"]["group_size"], 32);
}

TEST(CompressedTensorsWriterTest, LoadsBackAsQ4Bf16) {
  TempDir tmp;
  const std::string in = MakeTiny(tmp, DType::kF32), out = tmp / "int4";
  ASSERT_TRUE(Write(in, out, kAllLinears).ok());
  auto src = OpenCheckpoint(in);
  auto ck = OpenCheckpoint(out);
  ASSERT_TRUE(src.ok() && ck.ok()) << ck.status().ToString();
  int n_q4 = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    const TensorView& s = (*src)->tensors().at(name);
    EXPECT_EQ(t.shape, s.shape) << name;
    if (t.dtype != DType::kQ4_BF16) {
      EXPECT_TRUE(SameBytes(t, s)) << name;
      continue;
    }
    ++n_q4;
    // F32 weights are rounded to bf16 first, then quantized (QuantizeRow does both).
    std::vector<uint8_t> want(t.row_bytes());
    std::vector<float> row(static_cast<size_t>(t.cols()));
    for (int64_t r = 0; r < t.rows(); ++r) {
      DequantizeRow(s.dtype, s.row(r), row.data(), t.cols());
      QuantizeRow(DType::kQ4_BF16, row.data(), want.data(), t.cols());
      ASSERT_EQ(std::memcmp(want.data(), t.row(r), want.size()), 0) << name << " row " << r;
    }
  }
  EXPECT_EQ(n_q4, 14);
}

TEST(CompressedTensorsWriterTest, IgnoreEntriesFollowTheLibrary) {
  TempDir tmp;
  const std::string in = MakeTiny(tmp);
  // Exact names, and regexes matched at the start of the module name only
  // (re.match): "re:self_attn" matches nothing, "re:model\.layers\.1\." the
  // whole layer; modules ending in "norm" are never targeted.
  const std::vector<std::string> ignore = {"lm_head", "model.embed_tokens", "re:self_attn",
                                           R"(re:model\.layers\.1\.)",
                                           "model.layers.0.mlp.down_proj"};
  int n = 0;
  ASSERT_TRUE(Write(in, tmp / "a", ignore, &n).ok());
  EXPECT_EQ(n, 6);  // layer 0: q, k, v, o, gate, up
  std::vector<std::unique_ptr<MappedFile>> files;
  auto dst = ReadTensors(tmp / "a/model.safetensors", &files);
  EXPECT_TRUE(dst.count("model.layers.0.self_attn.q_proj.weight_packed"));
  EXPECT_TRUE(dst.count("model.layers.0.mlp.down_proj.weight"));
  EXPECT_TRUE(dst.count("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_TRUE(dst.count("model.layers.0.input_layernorm.weight"));
}

TEST(CompressedTensorsWriterTest, ShardedFoldersKeepTheirShardsAndSideFiles) {
  TempDir tmp;
  const std::string tiny = MakeTiny(tmp), in = tmp / "sharded", out = tmp / "int4";
  std::filesystem::create_directories(in);
  std::vector<std::unique_ptr<MappedFile>> files;
  auto src = ReadTensors(tiny + "/model.safetensors", &files);
  SafetensorsWriter w1, w2;
  json weight_map;
  for (const auto& [name, t] : src) {
    const bool first = name.find("layers.1.") == std::string::npos;
    ASSERT_TRUE((first ? w1 : w2).AddRawTensor(name, t.dtype, t.shape, t.data, t.nbytes).ok());
    weight_map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  ASSERT_TRUE(w1.Write(in + "/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(w2.Write(in + "/model-00002-of-00002.safetensors").ok());
  ASSERT_TRUE(WriteStringToFile(in + "/model.safetensors.index.json",
                                json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}
                                    .dump())
                  .ok());
  std::filesystem::copy_file(tiny + "/config.json", in + "/config.json");
  ASSERT_TRUE(WriteStringToFile(in + "/tokenizer_config.json", "{}").ok());
  ASSERT_TRUE(WriteStringToFile(in + "/pytorch_model.bin", "old weights").ok());

  ASSERT_TRUE(Write(in, out, kAllLinears).ok());
  auto index = ReadFileToString(out + "/model.safetensors.index.json");
  ASSERT_TRUE(index.ok());
  const json map = json::parse(*index)["weight_map"];
  EXPECT_EQ(map["model.layers.1.mlp.up_proj.weight_packed"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(map["model.layers.0.mlp.up_proj.weight_scale"], "model-00001-of-00002.safetensors");
  EXPECT_FALSE(map.contains("model.layers.0.mlp.up_proj.weight"));
  EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer_config.json"));
  EXPECT_FALSE(std::filesystem::exists(out + "/pytorch_model.bin"));
  auto ck = OpenCheckpoint(out);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->tensors().at("model.layers.1.mlp.up_proj.weight").dtype, DType::kQ4_BF16);
}

void ExpectError(const Status& st, const std::string& part) {
  ASSERT_FALSE(st.ok()) << part;
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(CompressedTensorsWriterTest, BadInputsFailWithTheReason) {
  TempDir tmp;
  const std::string in = MakeTiny(tmp);
  // The default (routed experts only) targets nothing in a dense Llama.
  ExpectError(Write(in, tmp / "a", DefaultCompressedTensorsIgnore()), "no weight matched");
  ExpectError(Write(in, tmp / "b", {"re:(unclosed"}), "ignore pattern 're:(unclosed'");
  ExpectError(Write(in, in, kAllLinears), "is the model folder itself");
  ASSERT_TRUE(Write(in, tmp / "c", kAllLinears).ok());
  ExpectError(Write(tmp / "c", tmp / "d", kAllLinears), "already quantized");

  // A targeted weight that cannot be grouped by 32, and one holding a NaN.
  const std::string odd = tmp / "odd";
  std::filesystem::create_directories(odd);
  std::filesystem::copy_file(in + "/config.json", odd + "/config.json");
  std::vector<float> v(2 * 48, 0.5f);
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddRawTensor("extra.proj.weight", DType::kF32, {2, 48}, v.data(), v.size() * 4).ok());
  ASSERT_TRUE(w.Write(odd + "/model.safetensors").ok());
  ExpectError(Write(odd, tmp / "e", {}), "tensor 'extra.proj.weight' [2, 48]: in_features 48 is "
                                         "not a multiple of the group size 32");
  v.resize(2 * 64, 0.5f);
  v[64 + 5] = std::nanf("");
  SafetensorsWriter w2;
  ASSERT_TRUE(w2.AddRawTensor("extra.proj.weight", DType::kF32, {2, 64}, v.data(), v.size() * 4).ok());
  ASSERT_TRUE(w2.Write(odd + "/model.safetensors").ok());
  ExpectError(Write(odd, tmp / "f", {}), "tensor 'extra.proj.weight': element [1, 5] is not finite");
}

}  // namespace
}  // namespace specd
