// GGUF parsing and GGUF checkpoints: bad files of every kind must give a
// Status naming the file, the key or tensor and expected vs found. Images
// are parsed from exactly-sized heap copies so ASan catches any overread.
#include <gtest/gtest.h>

#include <cstring>

#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/gguf_reader.h"
#include "loader/test_util.h"
#include "loader/weight_names.h"
#include "modelgen/fixture.h"
#include "modelgen/gguf_writer.h"

namespace specd {
namespace {

using testing_util::RowOf;
using testing_util::TempDir;

// Builds GGUF images byte by byte, so tests can write what no writer would.
class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Put(v); }
  Bytes& U32(uint32_t v) { return Put(v); }
  Bytes& I32(int32_t v) { return Put(v); }
  Bytes& U64(uint64_t v) { return Put(v); }
  Bytes& I64(int64_t v) { return Put(v); }
  Bytes& F32(float v) { return Put(v); }
  Bytes& Str(const std::string& s) {
    U64(s.size());
    s_ += s;
    return *this;
  }
  Bytes& Raw(const std::string& s) {
    s_ += s;
    return *this;
  }
  Bytes& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    s_ += "GGUF";
    return U32(version).U64(n_tensors).U64(n_kv);
  }
  Bytes& KvU32(const std::string& k, uint32_t v) { return Str(k).U32(4).U32(v); }
  Bytes& KvStr(const std::string& k, const std::string& v) { return Str(k).U32(8).Str(v); }
  // Tensor info: name, ne (ggml order), type, offset.
  Bytes& Info(const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) I64(d);
    return U32(type).U64(offset);
  }
  Bytes& Align(size_t a = 32) {
    while (s_.size() % a) s_ += '\0';
    return *this;
  }
  Bytes& Zeros(size_t n) {
    s_.append(n, '\0');
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  template <typename T>
  Bytes& Put(T v) {
    s_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  std::string s_;
};

StatusOr<GgufFile> Parse(const std::string& img, bool with_tensors = true) {
  std::vector<uint8_t> copy(img.begin(), img.end());
  return ParseGguf(copy.data(), copy.size(), "x/m.gguf", with_tensors);
}

void ExpectError(const std::string& img, StatusCode code, const std::vector<std::string>& parts) {
  auto r = Parse(img);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find("x/m.gguf"), std::string::npos) << r.status().message();
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

TEST(GgufParseTest, ReadsTypedMetadataAndTensorInfos) {
  Bytes b;
  b.Header(2, 6)
      .KvU32("a.u32", 7)
      .KvStr("general.architecture", "llama")
      .Str("a.f32").U32(6).F32(0.5f)
      .Str("a.bool").U32(7).U8(1)
      .Str("a.arr").U32(9).U32(5).U64(3).I32(-1).I32(0).I32(9)
      .Str("a.nested").U32(9).U32(9).U64(1).U32(4).U64(2).U32(1).U32(2);
  b.Info("w", {32, 2}, kGgmlQ8_0, 0).Info("n", {4}, kGgmlF32, 96).Align().Zeros(96 + 16);
  auto f = Parse(b.str());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(*f->GetInt("a.u32"), 7);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetFloat("a.f32"), 0.5);
  EXPECT_EQ(*f->GetFloat("a.u32"), 7.0);  // integers are numbers too
  EXPECT_TRUE(*f->GetBool("a.bool"));
  EXPECT_EQ(*f->GetNumArray("a.arr"), (std::vector<double>{-1, 0, 9}));
  EXPECT_EQ(f->kv.at("a.nested").count, 1u);
  ASSERT_EQ(f->tensors.size(), 2u);
  EXPECT_EQ(f->tensors[0].dtype, DType::kQ8_0);
  EXPECT_EQ(f->tensors[0].nbytes, 68u);
  EXPECT_EQ(f->tensors[1].offset, 96u);
  EXPECT_EQ(f->data_offset % 32, 0u);
  // Wrong types name the key, expected and found.
  auto s = f->GetString("a.u32");
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("key 'a.u32': expected string, found uint32"), std::string::npos)
      << s.status().message();
  auto arr = f->GetStringArray("a.arr");
  EXPECT_NE(arr.status().message().find("found array of int32"), std::string::npos);
  EXPECT_EQ(f->GetInt("nope").status().code(), StatusCode::kNotFound);
}

TEST(GgufParseTest, ReadsEveryGgmlBlockType) {
  const struct {
    uint32_t ggml;
    DType dtype;
  } kTypes[] = {{3, DType::kQ4_1},  {6, DType::kQ5_0},  {7, DType::kQ5_1},   {10, DType::kQ2_K},
                {11, DType::kQ3_K}, {12, DType::kQ4_K}, {13, DType::kQ5_K},  {14, DType::kQ6_K},
                {20, DType::kIQ4_NL}, {23, DType::kIQ4_XS}};
  for (const auto& c : kTypes) {
    SCOPED_TRACE(DTypeName(c.dtype));
    // Rows of two blocks, three rows.
    const int64_t row = 2 * DTypeBlockElems(c.dtype);
    const size_t nbytes = 6 * DTypeBlockBytes(c.dtype);
    Bytes b;
    b.Header(1, 0).Info("w", {row, 3}, c.ggml, 0).Align().Zeros((nbytes + 31) / 32 * 32);
    auto f = Parse(b.str());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->tensors[0].dtype, c.dtype);
    EXPECT_EQ(f->tensors[0].nbytes, nbytes);
    uint32_t back = 0;
    EXPECT_TRUE(GgmlFromDType(c.dtype, &back));
    EXPECT_EQ(back, c.ggml);
    // One byte short of the data: the tensor runs past the end.
    Bytes shorter;
    shorter.Header(1, 0).Info("w", {row, 3}, c.ggml, 0).Align().Zeros(nbytes - 1);
    ExpectError(shorter.str(), StatusCode::kCorruption, {"tensor 'w'", "past its end"});
  }
}

TEST(GgufParseTest, BadMagicAndVersion) {
  ExpectError("GGU", StatusCode::kCorruption, {"truncated"});
  ExpectError("GGML\3\0\0\0", StatusCode::kCorruption, {"magic", "47 47 4d 4c"});
  ExpectError(Bytes().Header(0, 0, 4).str(), StatusCode::kUnsupported, {"version 4"});
  ExpectError(Bytes().Header(0, 0, 0x03000000).str(), StatusCode::kUnsupported, {"big-endian"});
}

TEST(GgufParseTest, LyingLengthsAndCounts) {
  // Key string length past the end.
  ExpectError(Bytes().Header(0, 1).U64(1000).Raw(std::string(40, 'x')).str(), StatusCode::kCorruption,
              {"key of metadata entry 0", "string length 1000"});
  // Value string length past the end.
  ExpectError(Bytes().Header(0, 1).Str("k").U32(8).U64(~uint64_t{0}).str(), StatusCode::kCorruption,
              {"value of key 'k'", "string length"});
  // Array count past the end.
  ExpectError(Bytes().Header(0, 1).Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(1ull << 40).str(),
              StatusCode::kCorruption, {"key 'tokenizer.ggml.tokens'", "array of 1099511627776"});
  ExpectError(Bytes().Header(0, 1).Str("s").U32(9).U32(6).U64(3).F32(1).str(),
              StatusCode::kCorruption, {"key 's'", "array of 3 float32"});
  // Absurd counts.
  ExpectError(Bytes().Header(0, 1ull << 60).str(), StatusCode::kCorruption, {"metadata count"});
  ExpectError(Bytes().Header(1ull << 60, 0).str(), StatusCode::kCorruption, {"tensor count"});
  // Unknown value type, duplicate key, bad alignment.
  ExpectError(Bytes().Header(0, 1).Str("k").U32(13).U32(0).str(), StatusCode::kCorruption,
              {"key 'k'", "unknown value type 13"});
  ExpectError(Bytes().Header(0, 2).KvU32("k", 1).KvU32("k", 2).str(), StatusCode::kCorruption,
              {"duplicate metadata key 'k'"});
  ExpectError(Bytes().Header(0, 1).KvU32("general.alignment", 24).str(), StatusCode::kCorruption,
              {"general.alignment", "power of two", "24"});
  ExpectError(Bytes().Header(0, 1).KvStr("general.alignment", "32").str(), StatusCode::kCorruption,
              {"general.alignment", "expected uint32, found string"});
}

TEST(GgufParseTest, BadTensorInfos) {
  auto one = [](std::vector<int64_t> ne, uint32_t type, uint64_t offset, size_t data) {
    Bytes b;
    b.Header(1, 0).Info("blk.0.attn_q.weight", ne, type, offset).Align().Zeros(data);
    return b.str();
  };
  ExpectError(one({32, 2, 1, 1, 1}, kGgmlF32, 0, 256), StatusCode::kCorruption,
              {"tensor 'blk.0.attn_q.weight'", "n_dims is 5", "1..4"});
  ExpectError(one({32, -2}, kGgmlF32, 0, 256), StatusCode::kCorruption,
              {"tensor 'blk.0.attn_q.weight'", "negative"});
  ExpectError(one({1LL << 40, 1LL << 40}, kGgmlF32, 0, 256), StatusCode::kCorruption,
              {"tensor 'blk.0.attn_q.weight'", "overflows"});
  ExpectError(one({32, 2}, 16, 0, 256), StatusCode::kUnsupported,
              {"unsupported tensor type IQ2_XXS in tensor blk.0.attn_q.weight (supported: F32, F16, "
               "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)"});
  ExpectError(one({32, 2}, 19, 0, 256), StatusCode::kUnsupported, {"IQ1_S"});
  ExpectError(one({32, 2}, kGgmlQ4_K, 0, 256), StatusCode::kCorruption,
              {"row length 32", "Q4_K block size 256"});
  ExpectError(one({32, 2}, 99, 0, 256), StatusCode::kUnsupported, {"type 99"});
  ExpectError(one({33, 2}, kGgmlQ4_0, 0, 256), StatusCode::kCorruption,
              {"row length 33", "Q4_0 block size 32"});
  ExpectError(one({32, 2}, kGgmlF32, 4, 256), StatusCode::kCorruption,
              {"data offset 4", "alignment 32"});
  ExpectError(one({32, 2}, kGgmlF32, 0, 255), StatusCode::kCorruption,
              {"tensor 'blk.0.attn_q.weight'", "[0, 256)", "255 bytes"});
  ExpectError(one({32, 2}, kGgmlF32, 1ull << 62, 256), StatusCode::kCorruption,
              {"tensor 'blk.0.attn_q.weight'", "past its end"});
  Bytes dup;
  dup.Header(2, 0).Info("a", {4}, 0, 0).Info("a", {4}, 0, 32).Align().Zeros(64);
  ExpectError(dup.str(), StatusCode::kCorruption, {"duplicate tensor name 'a'"});
}

TEST(GgufParseTest, VocabLengthsMustAgree) {
  Bytes b;
  b.Header(0, 3)
      .KvStr("tokenizer.ggml.model", "llama")
      .Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(2).Str("a").Str("b")
      .Str("tokenizer.ggml.scores").U32(9).U32(6).U64(1).F32(0);
  auto f = Parse(b.str(), false);
  ASSERT_TRUE(f.ok());
  GgufVocab v;
  Status st = VocabFromGguf(*f, &v);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("'tokenizer.ggml.scores': expected 2 entries"), std::string::npos)
      << st.message();
  // Default SPM bos id 1 is inside a 2-token vocabulary; eos 2 is not.
  Bytes c;
  c.Header(0, 2)
      .KvStr("tokenizer.ggml.model", "llama")
      .Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(2).Str("a").Str("b");
  f = Parse(c.str(), false);
  ASSERT_TRUE(f.ok());
  st = VocabFromGguf(*f, &v);
  EXPECT_NE(st.message().find("tokenizer.ggml.eos_token_id"), std::string::npos) << st.message();
}

// A valid fixture file truncated at every offset of its header and at a
// spread of offsets in its data: always a clean Corruption.
TEST(GgufParseTest, TruncatedAtEveryOffsetFailsCleanly) {
  TempDir tmp;
  FixtureOptions o;
  o.format = "gguf";
  o.dtype = DType::kQ4_0;
  o.out = tmp / "m.gguf";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto full = ReadFileToString(o.out);
  ASSERT_TRUE(full.ok());
  auto f = Parse(*full);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const size_t header_end = f->data_offset;
  for (size_t n = 0; n < full->size(); n += (n < header_end + 64 ? 1 : 997)) {
    auto r = Parse(full->substr(0, n));
    ASSERT_FALSE(r.ok()) << "truncated to " << n;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << n << ": " << r.status().ToString();
  }
  // Metadata-only reads stop before the tensor infos.
  EXPECT_TRUE(Parse(full->substr(0, header_end), false).ok());
}

// ---- GGUF checkpoints ----

class GgufModelTest : public ::testing::Test {
 protected:
  // Writes a tiny model with `edit` applied to the writer's metadata before
  // the weights, or `skip` left out.
  std::string Write(const std::function<void(GgufWriter&)>& edit, const std::string& skip = "") {
    ModelConfig c = *FixturePreset("tiny");
    GgufWriter w;
    w.SetString("general.architecture", "llama");
    w.SetU32("llama.context_length", 2048);
    w.SetU32("llama.embedding_length", 64);
    w.SetU32("llama.block_count", 2);
    w.SetU32("llama.feed_forward_length", 128);
    w.SetU32("llama.attention.head_count", 4);
    w.SetU32("llama.attention.head_count_kv", 2);
    w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.SetU32("llama.vocab_size", 256);
    edit(w);
    for (const WeightSource& ws : RandomWeights(c, 0)) {
      const std::string name = HfName(ws.name);
      if (name == skip) continue;
      EXPECT_TRUE(w.AddTensor(name, DType::kF32, ws.shape, ws.rows).ok());
    }
    std::string path = tmp_ / ("m" + std::to_string(n_++) + ".gguf");
    EXPECT_TRUE(w.Write(path).ok());
    return path;
  }
  static std::string HfName(const std::string& hf) { return HfToGgufName(hf); }
  void ExpectOpenError(const std::string& path, StatusCode code, const std::vector<std::string>& parts) {
    auto ck = OpenCheckpoint(path);
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), code) << ck.status().ToString();
    EXPECT_NE(ck.status().message().find(path), std::string::npos) << ck.status().message();
    for (const std::string& p : parts) {
      EXPECT_NE(ck.status().message().find(p), std::string::npos)
          << "'" << p << "' not in: " << ck.status().message();
    }
  }
  TempDir tmp_;
  int n_ = 0;
};

TEST_F(GgufModelTest, ValidFileLoadsWithDefaults) {
  std::string path = Write([](GgufWriter&) {});
  auto ck = OpenCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const ModelConfig& c = (*ck)->config();
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.f);  // no rope.freq_base
  EXPECT_EQ(c.head_dim, 16);               // no key_length
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
}

TEST_F(GgufModelTest, UnknownArchitecture) {
  ExpectOpenError(Write([](GgufWriter& w) { w.SetString("general.architecture", "gpt2"); }),
                  StatusCode::kUnsupported, {"'gpt2'", "llama, qwen2, qwen3"});
}

TEST_F(GgufModelTest, MissingAndMistypedKeys) {
  ExpectOpenError(Write([](GgufWriter& w) { w.SetString("llama.block_count", "2"); }),
                  StatusCode::kInvalidArgument,
                  {"key 'llama.block_count': expected an integer, found string"});
  // A GgufWriter cannot delete keys; use a different arch prefix instead.
  ExpectOpenError(Write([](GgufWriter& w) { w.SetString("general.architecture", "qwen3"); }),
                  StatusCode::kNotFound, {"missing metadata key 'qwen3.block_count'"});
}

TEST_F(GgufModelTest, AbsurdMetadataNamesTheGgufKey) {
  ExpectOpenError(Write([](GgufWriter& w) { w.SetU32("llama.attention.head_count_kv", 3); }),
                  StatusCode::kInvalidArgument, {"llama.attention.head_count_kv = 3", "divisor"});
  ExpectOpenError(Write([](GgufWriter& w) { w.SetF32("llama.attention.layer_norm_rms_epsilon", 0); }),
                  StatusCode::kInvalidArgument, {"llama.attention.layer_norm_rms_epsilon = 0"});
  ExpectOpenError(Write([](GgufWriter& w) { w.SetU32("llama.rope.dimension_count", 8); }),
                  StatusCode::kUnsupported, {"rope.dimension_count", "partial rotary"});
  ExpectOpenError(Write([](GgufWriter& w) { w.SetString("llama.rope.scaling.type", "yarn"); }),
                  StatusCode::kUnsupported, {"yarn"});
}

TEST_F(GgufModelTest, MissingTensorAndWrongShape) {
  ExpectOpenError(Write([](GgufWriter&) {}, "blk.1.ffn_down.weight"), StatusCode::kNotFound,
                  {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight", "[64, 128]"});
  ExpectOpenError(Write([](GgufWriter& w) { w.SetU32("llama.feed_forward_length", 96); }),
                  StatusCode::kCorruption,
                  {"model.layers.0.mlp.gate_proj.weight", "expected shape [96, 64] (from GGUF "
                   "metadata), found [128, 64]"});
}

TEST_F(GgufModelTest, LinearRopeScalingAndEotIds) {
  std::string path = Write([](GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetF32("llama.rope.scaling.factor", 4.f);
    w.SetF32("llama.rope.freq_base", 500000.f);
    w.SetU32("tokenizer.ggml.eos_token_id", 2);
    w.SetU32("tokenizer.ggml.eot_token_id", 9);
  });
  auto ck = OpenCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->config().rope_scaling.type, "linear");
  EXPECT_FLOAT_EQ((*ck)->config().rope_scaling.factor, 4.f);
  EXPECT_FLOAT_EQ((*ck)->config().rope_theta, 500000.f);
  EXPECT_EQ((*ck)->config().eos_ids, (std::vector<int>{2, 9}));
}

TEST_F(GgufModelTest, NotAModelFile) {
  ASSERT_TRUE(WriteStringToFile(tmp_ / "x.bin", "hello").ok());
  auto ck = OpenCheckpoint(tmp_ / "x.bin");
  EXPECT_EQ(ck.status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(WriteStringToFile(tmp_ / "y.gguf", "GGUF").ok());
  ExpectOpenError(tmp_ / "y.gguf", StatusCode::kCorruption, {"truncated"});
}

}  // namespace
}  // namespace specd
