#include "model/shard_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace specd {
namespace {

ModelConfig Config(int n_heads, int n_kv_heads, int ffn_dim, int vocab, int head_dim = 64) {
  ModelConfig c;
  c.arch = "llama";
  c.n_layers = 2;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.hidden_dim = n_heads * head_dim;
  c.ffn_dim = ffn_dim;
  c.vocab_size = vocab;
  c.max_seq_len = 128;
  return c;
}

// Checks the sharding invariants for every rank of a world: query heads and
// FFN units are split into disjoint contiguous ranges covering everything;
// each rank holds the KV heads its query heads read; LM-head rows cover the
// vocabulary exactly once when vocab-parallel.
void CheckPartition(const ModelConfig& c, int world) {
  SCOPED_TRACE("world " + std::to_string(world));
  std::vector<int> q_owner(c.n_heads, 0), ffn_owner(c.ffn_dim, 0), vocab_owner(c.vocab_size, 0);
  const int group = c.n_heads / c.n_kv_heads;
  for (int r = 0; r < world; ++r) {
    auto p = ShardPlan::Create(c, r, world, false);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->rank, r);
    EXPECT_EQ(p->world, world);
    for (int h = p->q_head_begin; h < p->q_head_begin + p->n_q_heads; ++h) {
      ++q_owner[h];
      int kvh = h / group;
      EXPECT_GE(kvh, p->kv_head_begin);
      EXPECT_LT(kvh, p->kv_head_begin + p->n_kv_heads);
    }
    EXPECT_EQ(p->n_kv_heads, std::max(1, c.n_kv_heads / world));
    for (int f = p->ffn_begin; f < p->ffn_begin + p->ffn_len; ++f) ++ffn_owner[f];
    EXPECT_EQ(p->vocab_parallel, world > 1 && c.vocab_size % world == 0);
    if (p->vocab_parallel) {
      for (int v = p->vocab_begin; v < p->vocab_begin + p->vocab_len; ++v) ++vocab_owner[v];
    } else {
      EXPECT_EQ(p->vocab_len, c.vocab_size);
    }
    EXPECT_FALSE(p->ToString().empty());
  }
  for (int h = 0; h < c.n_heads; ++h) EXPECT_EQ(q_owner[h], 1) << "q head " << h;
  for (int f = 0; f < c.ffn_dim; ++f) ASSERT_EQ(ffn_owner[f], 1) << "ffn unit " << f;
  if (world > 1 && c.vocab_size % world == 0) {
    for (int v = 0; v < c.vocab_size; ++v) ASSERT_EQ(vocab_owner[v], 1) << "vocab row " << v;
  }
}

TEST(ShardPlanTest, WorldOneIsTheWholeModel) {
  ModelConfig c = Config(8, 2, 256, 1000);
  auto p = ShardPlan::Create(c, 0, 1, true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->q_head_begin, 0);
  EXPECT_EQ(p->n_q_heads, 8);
  EXPECT_EQ(p->kv_head_begin, 0);
  EXPECT_EQ(p->n_kv_heads, 2);
  EXPECT_EQ(p->ffn_begin, 0);
  EXPECT_EQ(p->ffn_len, 256);
  EXPECT_FALSE(p->vocab_parallel);
  EXPECT_EQ(p->vocab_begin, 0);
  EXPECT_EQ(p->vocab_len, 1000);
}

TEST(ShardPlanTest, SplitsAndReplicatesKvHeads) {
  ModelConfig c = Config(8, 2, 256, 1000);
  for (int world : {1, 2, 4, 8}) CheckPartition(c, world);
  // world 2: KV heads split; rank 1 holds q heads [4, 8) and KV head 1.
  auto p = ShardPlan::Create(c, 1, 2, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->q_head_begin, 4);
  EXPECT_EQ(p->n_q_heads, 4);
  EXPECT_EQ(p->kv_head_begin, 1);
  EXPECT_EQ(p->n_kv_heads, 1);
  EXPECT_EQ(p->ffn_begin, 128);
  EXPECT_EQ(p->vocab_begin, 500);
  // world 4 with 2 KV heads: each KV head is replicated on two ranks.
  for (int r = 0; r < 4; ++r) {
    auto q = ShardPlan::Create(c, r, 4, false);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->kv_head_begin, r / 2);
    EXPECT_EQ(q->n_kv_heads, 1);
  }
  // A vocabulary that does not divide is replicated.
  CheckPartition(Config(8, 8, 256, 1001), 2);
}

TEST(ShardPlanTest, ErrorsNameTheDimensionThatDoesNotDivide) {
  auto msg = [](const ModelConfig& c, int rank, int world, bool quantized) {
    auto p = ShardPlan::Create(c, rank, world, quantized);
    EXPECT_FALSE(p.ok());
    if (p.ok()) return std::string();
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    return p.status().message();
  };
  EXPECT_NE(msg(Config(6, 6, 256, 1000), 0, 4, false).find("n_heads = 6"), std::string::npos);
  EXPECT_NE(msg(Config(8, 8, 100, 1000), 0, 8, false).find("ffn_dim"), std::string::npos);
  std::string kv = msg(Config(12, 3, 240, 1000), 0, 4, false);
  EXPECT_NE(kv.find("n_kv_heads = 3"), std::string::npos) << kv;
  EXPECT_NE(msg(Config(8, 2, 256, 1000), 2, 2, false).find("rank 2"), std::string::npos);
  EXPECT_NE(msg(Config(8, 2, 256, 1000), 0, 0, false).find("world size 0"), std::string::npos);
  // Quantized row-parallel slices must fall on 32-element blocks: ffn 192 / 4
  // = 48 columns of down_proj per rank, o_proj 2 heads of 8 = 16 columns.
  std::string ffn = msg(Config(8, 8, 192, 1000), 0, 4, true);
  EXPECT_NE(ffn.find("ffn_dim is 48"), std::string::npos) << ffn;
  std::string o = msg(Config(8, 8, 256, 1000, /*head_dim=*/8), 0, 4, true);
  EXPECT_NE(o.find("o_proj is 16 columns"), std::string::npos) << o;
  EXPECT_TRUE(ShardPlan::Create(Config(8, 8, 192, 1000), 0, 4, false).ok())
      << "the block rule applies only to quantized weights";
}

TEST(ShardPlanTest, KQuantSlicesFallOn256ElementBlocks) {
  // ffn 512 / 4 = 128 columns of down_proj per rank: whole 32-element blocks,
  // half a 256-element one. o_proj: 2 heads of 128 = 256 columns.
  const ModelConfig c = Config(8, 8, 512, 1000, /*head_dim=*/128);
  EXPECT_TRUE(ShardPlan::Create(c, 0, 4, true, false, 32).ok());
  auto p = ShardPlan::Create(c, 0, 4, true, false, 256);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("ffn_dim is 128 columns of down_proj, not a multiple of "
                                      "the 256-element quantization block"),
            std::string::npos)
      << p.status().message();
  EXPECT_TRUE(ShardPlan::Create(c, 0, 2, true, false, 256).ok());
}

// MoE under TP: every rank holds a slice of every expert's units; under EP a
// disjoint range of whole experts. Both cover each (expert, unit) exactly once.
TEST(ShardPlanTest, MoeExpertsSplitByUnitsOrWhole) {
  ModelConfig c = Config(4, 4, 128, 256, 16);
  c.arch = "deepseek_v3";
  c.mla.kv_lora_rank = 32;
  c.mla.qk_rope_head_dim = 16;
  c.mla.qk_nope_head_dim = 16;
  c.mla.v_head_dim = 16;
  c.moe.n_routed_experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn_dim = 64;
  c.moe.n_shared_experts = 1;
  for (bool ep : {false, true}) {
    for (int world : {1, 2, 4}) {
      SCOPED_TRACE(std::string(ep ? "ep" : "tp") + " world " + std::to_string(world));
      std::vector<int> owner(8 * 64, 0), shared(64, 0);
      for (int r = 0; r < world; ++r) {
        auto p = ShardPlan::Create(c, r, world, false, ep);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        for (int e = p->expert_begin; e < p->expert_begin + p->n_local_experts; ++e)
          for (int u = p->expert_ffn_begin; u < p->expert_ffn_begin + p->expert_ffn_len; ++u)
            ++owner[e * 64 + u];
        for (int u = p->shared_ffn_begin; u < p->shared_ffn_begin + p->shared_ffn_len; ++u)
          ++shared[u];
        if (ep) EXPECT_EQ(p->expert_ffn_len, 64);
        else EXPECT_EQ(p->n_local_experts, 8);
      }
      for (int v : owner) EXPECT_EQ(v, 1);
      for (int v : shared) EXPECT_EQ(v, 1);
    }
  }
  auto bad = ShardPlan::Create(c, 0, 3, false, true);
  EXPECT_FALSE(bad.ok());
  auto dense = ShardPlan::Create(Config(4, 4, 128, 256, 16), 0, 2, false, true);
  ASSERT_FALSE(dense.ok());
  EXPECT_NE(dense.status().message().find("mixture-of-experts"), std::string::npos);
}

}  // namespace
}  // namespace specd
