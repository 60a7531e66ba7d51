#include "modelgen/eagle3_fixture.h"

#include <gtest/gtest.h>

#include "modelgen/fixture.h"

namespace specd {
namespace {

// The head's config.json reads back (through the loader's own parser) as the
// config Eagle3FixtureConfig made: the head takes the target's shapes.
TEST(Eagle3FixtureTest, ConfigJsonReadsBackAsTheHeadConfig) {
  StatusOr<ModelConfig> t = FixturePreset("llama-3.2-1b");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const ModelConfig h = Eagle3FixtureConfig(*t, 0);
  EXPECT_EQ(h.draft_vocab_size, 32000);
  EXPECT_EQ(h.eagle_aux_layer_ids, (std::vector<int>{2, 8, 13}));  // 16 layers
  StatusOr<ModelConfig> back = ParseHfConfig(Eagle3ConfigJson(h, DType::kBF16), "config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->arch, "llama_eagle3");
  EXPECT_EQ(back->n_layers, 1);
  EXPECT_EQ(back->hidden_dim, t->hidden_dim);
  EXPECT_EQ(back->n_heads, t->n_heads);
  EXPECT_EQ(back->n_kv_heads, t->n_kv_heads);
  EXPECT_EQ(back->head_dim, t->head_dim);
  EXPECT_EQ(back->ffn_dim, t->ffn_dim);
  EXPECT_EQ(back->vocab_size, t->vocab_size);
  EXPECT_EQ(back->rope_theta, t->rope_theta);
  EXPECT_EQ(back->rope_scaling.type, t->rope_scaling.type);
  EXPECT_EQ(back->draft_vocab_size, 32000);
  EXPECT_EQ(back->target_hidden_size, t->hidden_dim);
  EXPECT_EQ(back->eagle_aux_layer_ids, h.eagle_aux_layer_ids);
  EXPECT_FALSE(back->tie_embeddings);
}

TEST(Eagle3FixtureTest, SmallTargetsKeepAuxLayersInRangeAndDraftVocabBelowTheTargets) {
  StatusOr<ModelConfig> t = FixturePreset("tiny");  // 2 layers, vocab 256
  ASSERT_TRUE(t.ok());
  const ModelConfig h = Eagle3FixtureConfig(*t, 1000);
  EXPECT_EQ(h.draft_vocab_size, 256);
  for (int id : h.eagle_aux_layer_ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, t->n_layers);
  }
}

TEST(Eagle3FixtureTest, RefusesQuantizedDtypesAndAMissingTarget) {
  Eagle3FixtureOptions o;
  o.out = "/nonexistent/head";
  o.target = "/nonexistent/model";
  o.dtype = DType::kQ8_0;
  Status s = MakeEagle3Fixture(o);
  EXPECT_NE(s.message().find("safetensors, which cannot hold q8_0"), std::string::npos) << s.ToString();
  o.dtype = DType::kBF16;
  o.target.clear();
  s = MakeEagle3Fixture(o);
  EXPECT_NE(s.message().find("needs --target"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace specd
