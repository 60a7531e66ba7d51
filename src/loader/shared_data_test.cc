// Loads the real checkpoints in shared/data (skipped when absent) and checks
// them against each other: the GGUF copy of stories260K must equal the
// safetensors copy after llama.cpp's q/k permutation.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/test_reference.h"
#include "loader/checkpoint.h"
#include "loader/weight_names.h"

namespace specd {
namespace {

std::string SharedData(const std::string& rel) {
  return std::string(SPECD_SHARED_DATA) + "/" + rel;
}

#define REQUIRE_SHARED(path) \
  if (!std::filesystem::exists(path)) SPECD_REFERENCE_MISSING("shared data absent: " << (path))

std::vector<float> Row(const TensorView& t, int64_t r) {
  std::vector<float> out(static_cast<size_t>(t.cols()));
  DequantizeRow(t.dtype, t.row(r), out.data(), t.cols());
  return out;
}

TEST(SharedDataTest, Stories260KSafetensorsConfigAndShapes) {
  const std::string dir = SharedData("models/stories260K");
  REQUIRE_SHARED(dir + "/model.safetensors");
  auto ck = OpenCheckpoint(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.hidden_dim, 64);
  EXPECT_EQ(c.ffn_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_style, RopeStyle::kHalf);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.bos_id, 1);
  ASSERT_EQ(c.eos_ids.size(), 1u);
  EXPECT_EQ(c.eos_ids[0], 2);
  EXPECT_EQ((*ck)->format(), "safetensors");
  // 1 embedding + 9 per layer + final norm + explicit lm_head.
  EXPECT_EQ((*ck)->tensors().size(), 1u + 9 * 5 + 1 + 1);
  auto q = (*ck)->Get("model.layers.0.self_attn.q_proj.weight", {64, 64});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto k = (*ck)->Get("model.layers.0.self_attn.k_proj.weight", {32, 64});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  auto wrong = (*ck)->Get("model.layers.0.self_attn.k_proj.weight", {64, 64});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("expected shape [64, 64], found [32, 64]"),
            std::string::npos)
      << wrong.status().message();
}

TEST(SharedDataTest, Stories260KGgufMatchesSafetensorsAfterPermutation) {
  const std::string dir = SharedData("models/stories260K");
  REQUIRE_SHARED(dir + "/model-f32.gguf");
  auto st = OpenCheckpoint(dir);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  for (bool use_mmap : {true, false}) {
    LoadOptions opts;
    opts.use_mmap = use_mmap;
    auto gg = OpenCheckpoint(dir + "/model-f32.gguf", opts);
    ASSERT_TRUE(gg.ok()) << gg.status().ToString();
    const ModelConfig& a = (*st)->config();
    const ModelConfig& b = (*gg)->config();
    EXPECT_EQ(b.arch, "llama");
    EXPECT_EQ(b.rope_style, RopeStyle::kInterleaved);
    EXPECT_EQ(b.n_layers, a.n_layers);
    EXPECT_EQ(b.hidden_dim, a.hidden_dim);
    EXPECT_EQ(b.ffn_dim, a.ffn_dim);
    EXPECT_EQ(b.n_heads, a.n_heads);
    EXPECT_EQ(b.n_kv_heads, a.n_kv_heads);
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.vocab_size, a.vocab_size);
    EXPECT_EQ(b.max_seq_len, a.max_seq_len);
    EXPECT_FLOAT_EQ(b.norm_eps, a.norm_eps);
    EXPECT_FLOAT_EQ(b.rope_theta, a.rope_theta);
    EXPECT_TRUE(b.tie_embeddings);  // no output.weight in the GGUF
    EXPECT_EQ((*gg)->gguf_vocab().model, "no_vocab");
    // Same tensor set (lm_head aliased in the GGUF), same shapes.
    ASSERT_EQ((*gg)->tensors().size(), (*st)->tensors().size());
    for (const auto& [name, ts] : (*st)->tensors()) {
      auto tg = (*gg)->Get(name, ts.shape);
      ASSERT_TRUE(tg.ok()) << tg.status().ToString();
      int n_head = 0;
      const bool permuted = IsPermutedForGguf(name, b, &n_head);
      for (int64_t r = 0; r < ts.rows(); ++r) {
        int64_t src = permuted ? GgufRowToHfRow(r, ts.rows(), n_head) : r;
        ASSERT_EQ(Row(*tg, r), Row(ts, src)) << name << " gguf row " << r;
      }
    }
  }
}

TEST(SharedDataTest, LlamaTinyRandomF16DefaultsRopeTheta) {
  const std::string path = SharedData("gguf/llama-2-tiny-random.gguf");
  REQUIRE_SHARED(path);
  auto ck = OpenCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.f);  // no llama.rope.freq_base key
  EXPECT_EQ(c.n_layers, 1);
  EXPECT_EQ(c.hidden_dim, 8);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.ffn_dim, 32);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_seq_len, 4096);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.bos_id, 1);
  EXPECT_EQ((*ck)->tensors().size(), 12u);
  auto emb = (*ck)->Get("model.embed_tokens.weight", {32000, 8});
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  EXPECT_EQ(emb->dtype, DType::kF16);
  auto norm = (*ck)->Get("model.norm.weight", {8});
  ASSERT_TRUE(norm.ok()) << norm.status().ToString();
  EXPECT_EQ(norm->dtype, DType::kF32);
  auto head = (*ck)->Get("lm_head.weight", {32000, 8});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_NE(head->data, emb->data);  // untied: its own tensor
  EXPECT_EQ((*ck)->gguf_vocab().tokens.size(), 32000u);
  EXPECT_EQ((*ck)->gguf_vocab().model, "llama");
}

}  // namespace
}  // namespace specd
