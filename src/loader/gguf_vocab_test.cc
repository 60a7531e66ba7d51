#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <set>

#include "base/test_reference.h"
#include "loader/checkpoint.h"
#include "modelgen/fixture.h"

namespace specd {
namespace {

std::string SharedData(const std::string& rel) { return std::string(SPECD_SHARED_DATA) + "/" + rel; }

TEST(GgufVocabTest, ReadsSpmVocabOnlyFile) {
  const std::string path = SharedData("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(path)) SPECD_REFERENCE_MISSING("shared data absent: " << path);
  auto v = ReadGgufVocab(path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->model, "llama");
  EXPECT_EQ(v->tokens.size(), 32000u);
  EXPECT_EQ(v->scores.size(), 32000u);
  EXPECT_EQ(v->token_types.size(), 32000u);
  EXPECT_EQ(v->bos_id, 1);
  EXPECT_EQ(v->eos_id, 2);
  EXPECT_EQ(v->unk_id, 0);
  EXPECT_EQ(v->tokens[1], "<s>");
  EXPECT_EQ(v->tokens[2], "</s>");
  // Byte tokens <0x00>.. start at id 3 in the Llama 2 vocabulary (type 6 = byte).
  EXPECT_EQ(v->tokens[3], "<0x00>");
  EXPECT_EQ(v->token_types[3], 6);
  EXPECT_EQ(v->token_types[1], 3);
}

TEST(GgufVocabTest, ReadsGpt2BpeVocabOnlyFile) {
  const std::string path = SharedData("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  if (!std::filesystem::exists(path)) SPECD_REFERENCE_MISSING("shared data absent: " << path);
  auto v = ReadGgufVocab(path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->model, "gpt2");
  EXPECT_EQ(v->tokens.size(), 50257u);
  EXPECT_EQ(v->merges.size(), 50000u);
  EXPECT_EQ(v->tokens[0], "!");
  EXPECT_EQ(v->merges[0], "\u0120 t");
}

// make-model --vocab synthetic: an SPM vocabulary laid out like Llama 2's
// (special ids from the config, byte tokens in order, unique pieces), read
// back from the written GGUF.
TEST(GgufVocabTest, SyntheticVocabRoundTripsThroughGguf) {
  auto c = FixturePreset("tiny");
  ASSERT_TRUE(c.ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("specd-synth-" + std::to_string(::getpid()) + ".gguf"))
          .string();
  FixtureOptions o;
  o.preset = "tiny";
  o.format = "gguf";
  o.dtype = DType::kF16;
  o.out = path;
  o.vocab = "synthetic";
  ASSERT_TRUE(MakeFixture(o).ok());
  auto v = ReadGgufVocab(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->model, "llama");
  ASSERT_EQ(v->tokens.size(), static_cast<size_t>(c->vocab_size));
  ASSERT_EQ(v->token_types.size(), v->tokens.size());
  EXPECT_EQ(v->bos_id, c->bos_id);
  EXPECT_EQ(v->tokens[c->bos_id], "<s>");
  EXPECT_EQ(v->token_types[c->bos_id], 3);
  EXPECT_EQ(v->tokens[c->eos_ids[0]], "</s>");
  ASSERT_GE(v->unk_id, 0);
  EXPECT_EQ(v->tokens[v->unk_id], "<unk>");
  int bytes = 0;
  for (size_t id = 0; id < v->tokens.size(); ++id) {
    if (v->token_types[id] != 6) continue;
    char want[8];
    std::snprintf(want, sizeof(want), "<0x%02X>", bytes);
    EXPECT_EQ(v->tokens[id], want);
    ++bytes;
  }
  // All 256 bytes when they fit beside <unk>, <s> and </s> (tiny has 256 ids).
  EXPECT_EQ(bytes, std::min<int64_t>(256, c->vocab_size - 3));
  EXPECT_EQ(std::set<std::string>(v->tokens.begin(), v->tokens.end()).size(), v->tokens.size());

  o.format = "safetensors";
  EXPECT_FALSE(MakeFixture(o).ok());  // a vocabulary goes into GGUF only
  o.format = "gguf";
  o.vocab = "bpe";
  EXPECT_FALSE(MakeFixture(o).ok());
}

TEST(GgufVocabTest, MissingFileIsNotFound) {
  auto v = ReadGgufVocab("/nonexistent/vocab.gguf");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_NE(v.status().message().find("/nonexistent/vocab.gguf"), std::string::npos);
}

}  // namespace
}  // namespace specd
