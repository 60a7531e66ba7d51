// End to end on the GGUF block types people download: a tiny Llama whose
// matrices use every ggml type specd reads (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K,
// IQ4_NL, IQ4_XS; the embedding and the output matrix too) loads, and its
// logits and greedy tokens equal those of the same model with every weight
// dequantized to F32 (written as `specd quantize --dtype f32` would), bit for
// bit: the block-type matmul is the F32 matmul of the exact dequantization
// (kernels/cpu/dequant_matmul.h) and the embedding lookup dequantizes a row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "loader/checkpoint.h"
#include "modelgen/fixture.h"
#include "modelgen/model_writer.h"
#include "runtime/engine.h"
#include "runtime/model_runner.h"
#include "runtime/reference_decode.h"

namespace specd {
namespace {

namespace fs = std::filesystem;

// "tiny" widened so every row is a whole number of 256-element blocks:
// hidden 256 (4 heads of 64, 2 KV heads), FFN 512, vocabulary 256.
ModelConfig WideTiny() {
  ModelConfig c = *FixturePreset("tiny");
  c.hidden_dim = 256;
  c.head_dim = 64;
  c.ffn_dim = 512;
  return c;
}

// Every block type on some matrix of the two layers, the embedding and the
// output matrix (HF names).
std::map<std::string, DType> MixedDTypes() {
  const DType kLayer[2][7] = {{DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ3_K, DType::kQ2_K,
                               DType::kIQ4_XS, DType::kQ4_1},
                              {DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ4_K,
                               DType::kQ6_K, DType::kQ5_K, DType::kQ3_K}};
  const char* const kNames[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                 "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                 "mlp.down_proj"};
  std::map<std::string, DType> m;
  for (int l = 0; l < 2; ++l) {
    for (int i = 0; i < 7; ++i) {
      m["model.layers." + std::to_string(l) + "." + kNames[i] + ".weight"] = kLayer[l][i];
    }
  }
  m["model.embed_tokens.weight"] = DType::kQ4_K;
  m["lm_head.weight"] = DType::kQ6_K;
  return m;
}

class GgufBlockTypesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "specd-gguf-types-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<ModelRunner> Runner(const std::string& path) {
    RunnerOptions ro;
    ro.model_path = path;
    ro.threads = 2;
    auto r = ModelRunner::Create(ro, comm_.get());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string dir_;
  std::unique_ptr<Communicator> comm_ = NewLocalCommunicator();
};

TEST_F(GgufBlockTypesTest, MixedBlockTypesDecodeExactlyAsTheirF32Dequantization) {
  const ModelConfig c = WideTiny();
  const std::string mixed = dir_ + "/mixed.gguf", f32 = dir_ + "/f32.gguf";
  GgufModelOptions o;
  o.dtype = DType::kQ4_K;
  o.tensor_dtypes = MixedDTypes();
  ASSERT_TRUE(WriteGgufModel(c, RandomWeights(c, /*seed=*/11), o, mixed).ok());

  // The file holds every block type, in the matrices they were asked for.
  auto ck = OpenCheckpoint(mixed);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::set<DType> seen;
  for (const auto& [name, dtype] : MixedDTypes()) {
    auto t = (*ck)->Get(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    EXPECT_EQ(t->dtype, dtype) << name;
    seen.insert(t->dtype);
  }
  EXPECT_EQ(seen.size(), 10u);
  // The same model, every weight dequantized to F32.
  auto weights = WeightsFromCheckpoint(**ck);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  GgufModelOptions fo;
  fo.dtype = DType::kF32;
  ASSERT_TRUE(WriteGgufModel((*ck)->config(), *weights, fo, f32).ok());

  std::unique_ptr<ModelRunner> q_runner = Runner(mixed), f_runner = Runner(f32);
  ASSERT_NE(q_runner, nullptr);
  ASSERT_NE(f_runner, nullptr);
  Engine q_engine(q_runner.get()), f_engine(f_runner.get());

  // Every position's logits of a prompt, bit for bit.
  const std::vector<int32_t> prompt = {1, 17, 200, 3, 99, 42, 7, 255, 128};
  const int V = c.vocab_size;
  auto all_logits = [&](Engine& e) {
    const ScopedSequence seq(e);
    ForwardOutput out;
    EXPECT_TRUE(e.Forward({SeqInput{seq.id(), prompt, {}, {}, true}}, false, &out).ok());
    return out.logits;
  };
  const std::vector<float> q_logits = all_logits(q_engine), f_logits = all_logits(f_engine);
  ASSERT_EQ(q_logits.size(), prompt.size() * V);
  ASSERT_EQ(f_logits.size(), q_logits.size());
  float max_abs = 0.f, max_diff = 0.f;
  for (size_t i = 0; i < q_logits.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(f_logits[i]));
    max_diff = std::max(max_diff, std::fabs(q_logits[i] - f_logits[i]));
  }
  std::printf("[ mixed block types ] logits up to %.3g, maxdiff vs f32 %.3g\n", max_abs, max_diff);
  EXPECT_EQ(std::memcmp(q_logits.data(), f_logits.data(), q_logits.size() * sizeof(float)), 0)
      << "maxdiff " << max_diff;
  EXPECT_GT(max_abs, 0.f);

  // Greedy decoding: prompt in one pass, then a token per pass.
  const std::vector<int32_t> q_tokens = ReferenceDecode(q_engine, prompt, 24);
  const std::vector<int32_t> f_tokens = ReferenceDecode(f_engine, prompt, 24);
  ASSERT_EQ(q_tokens.size(), 24u);
  EXPECT_EQ(q_tokens, f_tokens);
  EXPECT_GT(std::set<int32_t>(q_tokens.begin(), q_tokens.end()).size(), 1u)
      << "a constant output would compare nothing";
}

}  // namespace
}  // namespace specd
