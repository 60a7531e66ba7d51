// Load-time tensor checks: overlapping byte ranges and NaN/Inf values, on
// hand-made tensor maps and on real files written by the fixture writer and
// then damaged the way a bad conversion damages them.
#include "loader/tensor_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <vector>

#include "loader/checkpoint.h"
#include "loader/test_util.h"
#include "modelgen/fixture.h"
#include "tensor/dtype.h"

namespace specd {
namespace {

TensorView View(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data) {
  TensorView t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = data;
  t.nbytes = t.rows() * t.row_bytes();
  return t;
}

TEST(TensorCheckTest, OverlappingRangesNameBothTensors) {
  std::vector<uint8_t> buf(4096);
  std::map<std::string, TensorView> m;
  m["a"] = View("a", DType::kF32, {4, 16}, buf.data());          // bytes [0, 256)
  m["b"] = View("b", DType::kF32, {4, 16}, buf.data() + 256);    // [256, 512)
  EXPECT_TRUE(CheckTensorRanges(m, "f", false).ok());
  m["c"] = View("c", DType::kF32, {4, 16}, buf.data() + 500);    // runs into b
  Status s = CheckTensorRanges(m, "model.gguf", false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'c'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("model.gguf"), std::string::npos) << s.message();
  // A tensor inside another one's range (not an exact alias) is caught too.
  m.erase("c");
  m["inner"] = View("inner", DType::kF32, {1, 16}, buf.data() + 64);
  EXPECT_FALSE(CheckTensorRanges(m, "f", false).ok());
}

// Two names over exactly the same bytes: only a tied LM head may alias the
// embedding, and only when the config ties them.
TEST(TensorCheckTest, ExactAliasesOnlyForATiedHead) {
  std::vector<uint8_t> buf(4096);
  std::map<std::string, TensorView> m;
  m["a"] = View("a", DType::kF32, {4, 16}, buf.data());
  m["b"] = View("b", DType::kF32, {4, 16}, buf.data());  // aliases a exactly
  for (bool tied : {false, true}) {
    Status s = CheckTensorRanges(m, "model.gguf", tied);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find("'a' and 'b'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("share the same bytes"), std::string::npos) << s.message();
  }
  m.clear();
  m["model.embed_tokens.weight"] = View("model.embed_tokens.weight", DType::kF32, {4, 16}, buf.data());
  m["lm_head.weight"] = View("lm_head.weight", DType::kF32, {4, 16}, buf.data());
  EXPECT_TRUE(CheckTensorRanges(m, "f", true).ok());
  EXPECT_FALSE(CheckTensorRanges(m, "f", false).ok());
}

TEST(TensorCheckTest, NonFiniteValuesInEveryFloatTypeAreFound) {
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (float bad : bad_values) {
      std::vector<float> x(3 * 64, 0.5f);
      x[2 * 64 + 7] = bad;
      std::vector<uint8_t> raw(3 * RowBytes(dt, 64));
      for (int r = 0; r < 3; ++r) QuantizeRow(dt, x.data() + r * 64, raw.data() + r * RowBytes(dt, 64), 64);
      std::map<std::string, TensorView> m;
      m["model.norm.weight"] = View("model.norm.weight", dt, {3, 64}, raw.data());
      Status s = CheckTensorValues(m, CheckTensors::kDefault, "m");
      ASSERT_FALSE(s.ok()) << DTypeName(dt) << " " << bad;
      EXPECT_EQ(s.code(), StatusCode::kCorruption);
      EXPECT_NE(s.message().find("element 135 (row 2, column 7)"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("--check-tensors off"), std::string::npos) << s.message();
      EXPECT_TRUE(CheckTensorValues(m, CheckTensors::kOff, "m").ok());
    }
  }
}

TEST(TensorCheckTest, DefaultScansNormsEmbeddingsAndScalesFullScansAll) {
  std::vector<float> x(64, 0.25f);
  x[10] = std::numeric_limits<float>::quiet_NaN();
  std::map<std::string, TensorView> m;
  m["model.layers.0.mlp.up_proj.weight"] = View("model.layers.0.mlp.up_proj.weight", DType::kF32, {1, 64}, x.data());
  size_t scanned = 0;
  EXPECT_TRUE(CheckTensorValues(m, CheckTensors::kDefault, "m", &scanned).ok());
  EXPECT_EQ(scanned, 0u);
  EXPECT_FALSE(CheckTensorValues(m, CheckTensors::kFull, "m", &scanned).ok());
  // A Q8_0 matrix whose block scale is Inf: every mode but off finds it.
  std::vector<float> y(128, 1.0f);
  std::vector<BlockQ8_0> q(4);
  QuantizeRowQ8_0(y.data(), q.data(), 128);
  q[3].d = 0x7C00;  // fp16 +Inf
  std::map<std::string, TensorView> mq;
  mq["w"] = View("w", DType::kQ8_0, {1, 128}, q.data());
  Status s = CheckTensorValues(mq, CheckTensors::kDefault, "m");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the scale of block 3 (row 0, elements 96..127)"), std::string::npos)
      << s.message();
  EXPECT_TRUE(CheckTensorValues(mq, CheckTensors::kOff, "m").ok());
  q[3].d = 0x3C00;  // 1.0
  EXPECT_TRUE(CheckTensorValues(mq, CheckTensors::kFull, "m").ok());
}

TEST(TensorCheckTest, FindsANonFiniteMinOfAKQuantBlock) {
  // Q4_K: 256-element blocks with an fp16 scale and an fp16 min.
  std::vector<float> y(1024, 0.5f);
  std::vector<BlockQ4_K> q(4);
  QuantizeRow(DType::kQ4_K, y.data(), q.data(), 1024);
  q[3].dmin = 0x7E00;  // fp16 NaN
  std::map<std::string, TensorView> m;
  m["w"] = View("w", DType::kQ4_K, {2, 512}, q.data());
  Status s = CheckTensorValues(m, CheckTensors::kDefault, "m");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the scale of block 3 (row 1, elements 256..511)"), std::string::npos)
      << s.message();
  q[3].dmin = 0x3C00;
  EXPECT_TRUE(CheckTensorValues(m, CheckTensors::kDefault, "m").ok());
}

TEST(TensorCheckTest, ParseNamesTheAcceptedValues) {
  EXPECT_EQ(*ParseCheckTensors("off"), CheckTensors::kOff);
  EXPECT_EQ(*ParseCheckTensors("default"), CheckTensors::kDefault);
  EXPECT_EQ(*ParseCheckTensors("full"), CheckTensors::kFull);
  auto bad = ParseCheckTensors("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("off, default or full"), std::string::npos);
}

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void Spit(const std::string& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

// A NaN written into a norm of a real safetensors file.
TEST(TensorCheckFileTest, NanInANormStopsTheLoadUnlessChecksAreOff) {
  testing_util::TempDir dir;
  FixtureOptions o;
  o.preset = "tiny";
  o.out = dir / "m";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto ck = OpenCheckpoint(o.out);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const TensorView norm = *(*ck)->Get("model.norm.weight");
  const std::string file = o.out + "/model.safetensors";
  std::string bytes = Slurp(file);
  // Where the norm's bytes sit in the file: find them.
  const std::string current(static_cast<const char*>(norm.data), norm.nbytes);
  const size_t at = bytes.find(current);
  ASSERT_NE(at, std::string::npos);
  ck->reset();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + at + 4 * 5, &nan, 4);
  Spit(file, bytes);
  auto bad = OpenCheckpoint(o.out);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  // (Norm weights start equal, so the bytes found may be another norm's.)
  EXPECT_NE(bad.status().message().find("norm.weight'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("element 5"), std::string::npos) << bad.status().message();
  LoadOptions off;
  off.check_tensors = CheckTensors::kOff;
  EXPECT_TRUE(OpenCheckpoint(o.out, off).ok());
}

// A Q8_0 tensor retyped to F32 in the GGUF header: its declared size runs
// into the next tensor.
TEST(TensorCheckFileTest, RetypedGgufTensorOverlapsItsNeighbour) {
  testing_util::TempDir dir;
  FixtureOptions o;
  o.preset = "tiny";
  o.format = "gguf";
  o.dtype = DType::kQ8_0;
  o.out = dir / "m.gguf";
  ASSERT_TRUE(MakeFixture(o).ok());
  std::string bytes = Slurp(o.out);
  // Tensor info: u64 name length, name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset.
  const std::string name = "blk.0.attn_q.weight";
  size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  size_t p = at + name.size();
  uint32_t n_dims;
  std::memcpy(&n_dims, bytes.data() + p, 4);
  p += 4 + 8 * n_dims;
  uint32_t type;
  std::memcpy(&type, bytes.data() + p, 4);
  ASSERT_EQ(type, 8u) << "expected GGML_TYPE_Q8_0";
  const uint32_t f32 = 0;
  std::memcpy(bytes.data() + p, &f32, 4);
  Spit(o.out, bytes);
  auto ck = OpenCheckpoint(o.out);
  ASSERT_FALSE(ck.ok()) << "a retyped tensor loaded";
  EXPECT_EQ(ck.status().code(), StatusCode::kCorruption) << ck.status().ToString();
  EXPECT_NE(ck.status().message().find("attn"), std::string::npos) << ck.status().message();
}

}  // namespace
}  // namespace specd
