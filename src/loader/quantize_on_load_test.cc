// Quantize-on-load (LoadOptions::quantize) against the GGUF `specd quantize`
// writes from the same safetensors folder: both run the reference row
// quantizer of tensor/dtype.h on the same f32 rows, so every matrix must be
// bit-identical once GGUF's q/k row permutation is undone.
#include <gtest/gtest.h>

#include <cstring>

#include "loader/checkpoint.h"
#include "loader/test_util.h"
#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"

namespace specd {
namespace {

using testing_util::TempDir;

bool PermutedInGguf(const std::string& name) {
  return name.find("q_proj.weight") != std::string::npos ||
         name.find("k_proj.weight") != std::string::npos;
}

class QuantizeOnLoadTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizeOnLoadTest, MatchesSpecdQuantizeGguf) {
  const DType dt = GetParam();
  TempDir dir;
  for (const char* preset : {"tiny", "qwen2-tiny"}) {
    SCOPED_TRACE(preset);
    FixtureOptions fo;
    fo.preset = preset;
    fo.out = dir / preset;
    fo.seed = 5;
    ASSERT_TRUE(MakeFixture(fo).ok());

    LoadOptions lo;
    lo.quantize = dt;
    auto onload = OpenCheckpoint(fo.out, lo);
    ASSERT_TRUE(onload.ok()) << onload.status().ToString();

    // What `specd quantize --dtype q8_0|q4_0` does.
    auto src = OpenCheckpoint(fo.out);
    ASSERT_TRUE(src.ok());
    auto weights = WeightsFromCheckpoint(**src);
    ASSERT_TRUE(weights.ok());
    GgufModelOptions go;
    go.dtype = dt;
    const std::string gguf_path = dir / (std::string(preset) + ".gguf");
    ASSERT_TRUE(WriteGgufModel((*src)->config(), *weights, go, gguf_path).ok());
    auto gguf = OpenCheckpoint(gguf_path);
    ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();

    const ModelConfig& c = (*onload)->config();
    int n_matrices = 0;
    for (const auto& [name, t] : (*onload)->tensors()) {
      SCOPED_TRACE(name);
      auto g = (*gguf)->Get(name);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ASSERT_EQ(t.shape, g->shape);
      if (t.shape.size() != 2) {
        EXPECT_FALSE(IsQuantized(t.dtype));  // norms stay float
        continue;
      }
      ++n_matrices;
      ASSERT_EQ(t.dtype, dt);
      ASSERT_EQ(g->dtype, dt);
      const int64_t rows = t.shape[0];
      const int n_head = name.find("k_proj") != std::string::npos ? c.n_kv_heads : c.n_heads;
      const bool permuted = c.arch == "llama" && PermutedInGguf(name);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t gr = permuted ? HfRowToGgufRow(r, rows, n_head) : r;
        ASSERT_EQ(std::memcmp(t.row(r), g->row(gr), t.row_bytes()), 0) << "row " << r;
      }
    }
    EXPECT_GT(n_matrices, 7);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QuantizeOnLoadTest, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(QuantizeOnLoadErrorTest, RejectsNonBlockDtype) {
  TempDir dir;
  FixtureOptions fo;
  fo.out = dir / "m";
  ASSERT_TRUE(MakeFixture(fo).ok());
  LoadOptions lo;
  lo.quantize = DType::kF16;
  auto ck = OpenCheckpoint(fo.out, lo);
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.status().message().find("q8_0 or q4_0"), std::string::npos);
}

}  // namespace
}  // namespace specd
