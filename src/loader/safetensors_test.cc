// safetensors parsing and model folders: every kind of bad file must give a
// Status naming the file, the tensor and expected vs found (never a crash).
// Truncated images are parsed from exactly-sized heap copies so ASan would
// catch any read past the end.
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

using testing_util::RowOf;
using testing_util::TempDir;

// A safetensors image from a header JSON text and `data_bytes` of data.
std::string Image(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  s += header;
  s.append(data_bytes, '\x01');
  return s;
}

StatusOr<std::vector<TensorView>> ParseImage(const std::string& img) {
  std::vector<uint8_t> copy(img.begin(), img.end());  // exact size for ASan
  auto r = ParseSafetensors(copy.data(), copy.size(), "dir/model.safetensors");
  if (r.ok()) {
    for (TensorView& t : *r) t.data = nullptr;  // copy dies here
  }
  return r;
}

void ExpectError(const std::string& img, StatusCode code, const std::vector<std::string>& parts) {
  auto r = ParseImage(img);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find("dir/model.safetensors"), std::string::npos)
      << r.status().message();
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

TEST(SafetensorsTest, ParsesDtypesShapesAndSkipsMetadata) {
  std::string img = Image(
      R"({"__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
          "d2t": {"dtype": "I64", "shape": [2], "data_offsets": [32, 48]},
          "t2d": {"dtype": "BOOL", "shape": [3], "data_offsets": [48, 51]},
          "i": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]},
          "c": {"dtype": "I8", "shape": [0], "data_offsets": [51, 51]},
          "s": {"dtype": "F16", "shape": [], "data_offsets": [0, 2]}})",
      51);
  auto r = ParseImage(img);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 7u);  // sorted by name, no __metadata__
  std::map<std::string, TensorView> m;
  for (const TensorView& t : *r) m[t.name] = t;
  EXPECT_EQ(m["a"].dtype, DType::kF32);
  EXPECT_EQ(m["a"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m["a"].nbytes, 24u);
  EXPECT_EQ(m["b"].dtype, DType::kBF16);
  EXPECT_EQ(m["d2t"].dtype, DType::kI64);
  EXPECT_EQ(m["t2d"].dtype, DType::kBool);
  EXPECT_EQ(m["i"].dtype, DType::kI32);  // overlaps "a": allowed
  EXPECT_EQ(m["c"].nbytes, 0u);
  EXPECT_EQ(m["s"].shape.size(), 0u);  // scalar
  EXPECT_EQ(m["s"].nbytes, 2u);
}

TEST(SafetensorsTest, ShortFileAndHeaderPastEnd) {
  ExpectError("", StatusCode::kCorruption, {"0 bytes", "8-byte"});
  ExpectError(std::string(5, '\0'), StatusCode::kCorruption, {"5 bytes"});
  std::string img = Image("{}", 0);
  uint64_t n = 1000;
  std::memcpy(img.data(), &n, 8);
  ExpectError(img, StatusCode::kCorruption, {"header length 1000", "2 bytes"});
  n = ~uint64_t{0};
  std::memcpy(img.data(), &n, 8);
  ExpectError(img, StatusCode::kCorruption, {"header length 18446744073709551615"});
}

TEST(SafetensorsTest, HeaderNotJson) {
  ExpectError(Image("{\"a\": {", 0), StatusCode::kCorruption, {"not valid JSON"});
  ExpectError(Image("[1,2]", 0), StatusCode::kCorruption, {"expected a JSON object"});
  ExpectError(Image("{\"a\": 5}", 0), StatusCode::kCorruption, {"tensor 'a'", "expected an object"});
  ExpectError(Image(R"({"a": {"dtype": "F32", "shape": [1]}})", 4), StatusCode::kCorruption,
              {"tensor 'a'", "data_offsets"});
}

TEST(SafetensorsTest, UnknownDtypeNamesDtypeTensorAndFile) {
  ExpectError(Image(R"({"w": {"dtype": "U16", "shape": [4], "data_offsets": [0, 8]}})", 8),
              StatusCode::kUnsupported,
              {"unknown dtype U16 in tensor w of file dir/model.safetensors"});
  // FP8 (DeepSeek-V3's release): the way to a loadable checkpoint.
  ExpectError(Image(R"({"w": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}})", 4),
              StatusCode::kUnsupported,
              {"dtype F8_E4M3 in tensor w of file dir/model.safetensors",
               "convert them to BF16 first (DeepSeek-V3's inference/fp8_cast_bf16.py)"});
}

TEST(SafetensorsTest, LyingOffsetsAndShapes) {
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 32]}})", 16),
              StatusCode::kCorruption, {"tensor 'w'", "[0, 32]", "past the end", "16 bytes"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})", 16),
              StatusCode::kCorruption, {"tensor 'w'", "begin is after end"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}})", 16),
              StatusCode::kCorruption, {"tensor 'w'", "hold 12 bytes", "F32 x [4] needs 16 bytes"});
  ExpectError(Image(R"({"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 16]}})", 16),
              StatusCode::kCorruption, {"F16 x [2, 3] needs 12 bytes"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})", 16),
              StatusCode::kCorruption, {"tensor 'w'", "negative or absurd"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [1099511627777], "data_offsets": [0, 16]}})",
                    16),
              StatusCode::kCorruption, {"tensor 'w'", "absurd"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [1048576, 1048576, 1048576, 1048576],
                              "data_offsets": [0, 16]}})",
                    16),
              StatusCode::kCorruption, {"tensor 'w'", "overflows"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 16]}})", 16),
              StatusCode::kCorruption, {"tensor 'w'", "integers"});
  ExpectError(Image(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [-1, 15]}})", 16),
              StatusCode::kCorruption, {"tensor 'w'", "non-negative"});
}

TEST(SafetensorsTest, TruncatedAtEveryOffsetFailsCleanly) {
  TempDir tmp;
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddTensor("a", DType::kF32, {2, 12}, [](int64_t r, float* d) {
                 for (int i = 0; i < 12; ++i) d[i] = static_cast<float>(r * 12 + i);
               }).ok());
  ASSERT_TRUE(w.AddTensor("b", DType::kBF16, {3}, [](int64_t, float* d) {
                 d[0] = 1, d[1] = 2, d[2] = 3;
               }).ok());
  ASSERT_TRUE(w.Write(tmp / "m.safetensors").ok());
  auto full = ReadFileToString(tmp / "m.safetensors");
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(ParseImage(*full).ok());
  for (size_t n = 0; n < full->size(); ++n) {
    auto r = ParseImage(full->substr(0, n));
    ASSERT_FALSE(r.ok()) << "truncated to " << n << " bytes";
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  }
}

TEST(SafetensorsTest, WriterOutputIsAlignedAndReadable) {
  TempDir tmp;
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddTensor("z16", DType::kF16, {3}, [](int64_t, float* d) { d[0] = d[1] = d[2] = 1; }).ok());
  ASSERT_TRUE(w.AddTensor("a32", DType::kF32, {5}, [](int64_t, float* d) {
                 for (int i = 0; i < 5; ++i) d[i] = static_cast<float>(i) - 2.5f;
               }).ok());
  int64_t ids[3] = {7, -1, 1LL << 40};
  ASSERT_TRUE(w.AddRawTensor("d2t", DType::kI64, {3}, ids, sizeof(ids)).ok());
  EXPECT_EQ(w.AddRawTensor("q", DType::kQ8_0, {32}, ids, 34).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(w.AddRawTensor("bad", DType::kI64, {4}, ids, sizeof(ids)).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(w.Write(tmp / "m.safetensors").ok());
  auto mf = MappedFile::Open(tmp / "m.safetensors");
  ASSERT_TRUE(mf.ok());
  uint64_t hlen = 0;
  std::memcpy(&hlen, (*mf)->data(), 8);
  EXPECT_EQ(hlen % 8, 0u);
  auto r = ParseSafetensors((*mf)->data(), (*mf)->size(), "m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const TensorView& t : *r) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % DTypeBlockBytes(t.dtype), 0u) << t.name;
    if (t.name == "a32") {
      EXPECT_EQ(RowOf(t, 0), (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f}));
    }
    if (t.name == "d2t") {
      EXPECT_EQ(std::memcmp(t.data, ids, sizeof(ids)), 0);
    }
  }
}

// ---- model folders ----

class FolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FixtureOptions o;
    o.out = tmp_ / "m";
    ASSERT_TRUE(MakeFixture(o).ok());
    cfg_ = *FixturePreset("tiny");
    weights_ = RandomWeights(cfg_, 0);
  }
  // Rewrites model.safetensors with `edit` applied to the weight list.
  void Rewrite(const std::function<void(std::vector<WeightSource>&)>& edit) {
    std::vector<WeightSource> w = weights_;
    edit(w);
    SafetensorsWriter sw;
    for (const WeightSource& ws : w) ASSERT_TRUE(sw.AddTensor(ws.name, DType::kF32, ws.shape, ws.rows).ok());
    ASSERT_TRUE(sw.Write(tmp_ / "m/model.safetensors").ok());
  }
  TempDir tmp_;
  ModelConfig cfg_;
  std::vector<WeightSource> weights_;
};

TEST_F(FolderTest, MissingTensorIsNamed) {
  Rewrite([](auto& w) {
    w.erase(std::find_if(w.begin(), w.end(), [](const WeightSource& s) {
      return s.name == "model.layers.1.mlp.up_proj.weight";
    }));
  });
  auto ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ck.status().message().find("'model.layers.1.mlp.up_proj.weight'"), std::string::npos)
      << ck.status().message();
  EXPECT_NE(ck.status().message().find("[128, 64]"), std::string::npos) << ck.status().message();
}

TEST_F(FolderTest, WrongShapeIsNamed) {
  Rewrite([](auto& w) {
    for (WeightSource& s : w) {
      if (s.name == "model.layers.0.self_attn.k_proj.weight") s.shape = {64, 64};
    }
  });
  auto ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kCorruption);
  EXPECT_NE(ck.status().message().find("'model.layers.0.self_attn.k_proj.weight': expected shape "
                                       "[32, 64] (from config.json), found [64, 64]"),
            std::string::npos)
      << ck.status().message();
}

TEST_F(FolderTest, MissingConfigAndWeights) {
  std::filesystem::remove(tmp_ / "m/config.json");
  auto ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ck.status().message().find("config.json"), std::string::npos);
  std::filesystem::create_directories(tmp_ / "empty");
  ASSERT_TRUE(WriteStringToFile(tmp_ / "empty/config.json", *HfConfigJson(cfg_, DType::kF32)).ok());
  ck = OpenCheckpoint(tmp_ / "empty");
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.status().message().find("no model.safetensors"), std::string::npos);
  ck = OpenCheckpoint(tmp_ / "nothing_here");
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
}

TEST_F(FolderTest, UnknownArchitectureInConfig) {
  auto text = ReadFileToString(tmp_ / "m/config.json");
  std::string s = *text;
  s.replace(s.find("LlamaForCausalLM"), 16, "FalconForCausalLM");
  ASSERT_TRUE(WriteStringToFile(tmp_ / "m/config.json", s).ok());
  auto ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(ck.status().message().find("FalconForCausalLM"), std::string::npos);
  EXPECT_NE(ck.status().message().find("config.json"), std::string::npos);
}

TEST_F(FolderTest, ShardedWithIndexLoadsAndChecksTheIndex) {
  std::filesystem::remove(tmp_ / "m/model.safetensors");
  SafetensorsWriter a, b;
  nlohmann::json index;
  for (size_t i = 0; i < weights_.size(); ++i) {
    const WeightSource& w = weights_[i];
    SafetensorsWriter& dst = i % 2 ? b : a;
    ASSERT_TRUE(dst.AddTensor(w.name, DType::kF16, w.shape, w.rows).ok());
    index["weight_map"][w.name] = i % 2 ? "model-00002-of-00002.safetensors"
                                        : "model-00001-of-00002.safetensors";
  }
  ASSERT_TRUE(a.Write(tmp_ / "m/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(b.Write(tmp_ / "m/model-00002-of-00002.safetensors").ok());
  // Without the index the shards are found by name.
  auto ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_TRUE(WriteStringToFile(tmp_ / "m/model.safetensors.index.json", index.dump()).ok());
  LoadOptions no_mmap;
  no_mmap.use_mmap = false;
  ck = OpenCheckpoint(tmp_ / "m", no_mmap);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (const WeightSource& w : weights_) {
    auto t = (*ck)->Get(w.name, w.shape);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->dtype, DType::kF16);
    std::vector<float> x(static_cast<size_t>(w.shape.back()));
    w.rows(0, x.data());
    std::vector<float> got = RowOf(*t, 0);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], F16ToF32(F32ToF16(x[i])));
  }
  // The index names a tensor the shard does not hold.
  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  ASSERT_TRUE(WriteStringToFile(tmp_ / "m/model.safetensors.index.json", index.dump()).ok());
  ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ck.status().message().find("model.safetensors.index.json"), std::string::npos);
  // The index names a shard that does not exist.
  index["weight_map"]["model.norm.weight"] = "model-00003-of-00002.safetensors";
  ASSERT_TRUE(WriteStringToFile(tmp_ / "m/model.safetensors.index.json", index.dump()).ok());
  ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.status().message().find("model-00003-of-00002.safetensors"), std::string::npos);
  // Paths leaving the folder are refused.
  index["weight_map"]["model.norm.weight"] = "../x.safetensors";
  ASSERT_TRUE(WriteStringToFile(tmp_ / "m/model.safetensors.index.json", index.dump()).ok());
  ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kCorruption);
}

TEST_F(FolderTest, DuplicateTensorAcrossShards) {
  std::filesystem::remove(tmp_ / "m/model.safetensors");
  SafetensorsWriter a;
  for (const WeightSource& w : weights_) ASSERT_TRUE(a.AddTensor(w.name, DType::kF32, w.shape, w.rows).ok());
  ASSERT_TRUE(a.Write(tmp_ / "m/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(a.Write(tmp_ / "m/model-00002-of-00002.safetensors").ok());
  auto ck = OpenCheckpoint(tmp_ / "m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kCorruption);
  EXPECT_NE(ck.status().message().find("appears in both"), std::string::npos);
}

TEST(EagleFolderTest, LoadsIntegerTensors) {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "e");
  ASSERT_TRUE(WriteStringToFile(tmp / "e/config.json", R"({
      "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
      "vocab_size": 256, "draft_vocab_size": 32, "tie_word_embeddings": false})")
                  .ok());
  std::vector<int64_t> d2t(32);
  for (int i = 0; i < 32; ++i) d2t[i] = i * 3;
  std::vector<uint8_t> t2d(256, 0);
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddRawTensor("d2t", DType::kI64, {32}, d2t.data(), d2t.size() * 8).ok());
  ASSERT_TRUE(w.AddRawTensor("t2d", DType::kBool, {256}, t2d.data(), t2d.size()).ok());
  ASSERT_TRUE(w.AddTensor("fc.weight", DType::kBF16, {64, 192}, [](int64_t, float* d) {
                 std::fill(d, d + 192, 0.25f);
               }).ok());
  ASSERT_TRUE(w.Write(tmp / "e/model.safetensors").ok());
  auto ck = OpenCheckpoint(tmp / "e");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->config().arch, "llama_eagle3");
  auto t = (*ck)->Get("d2t", {32});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype, DType::kI64);
  EXPECT_EQ(static_cast<const int64_t*>(t->data)[31], 93);
  EXPECT_EQ((*ck)->Get("t2d")->dtype, DType::kBool);
  auto missing = (*ck)->Get("lm_head.weight");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("lm_head.weight"), std::string::npos);
}

}  // namespace
}  // namespace specd
