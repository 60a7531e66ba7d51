#include <gtest/gtest.h>

#include <filesystem>

#include "loader/checkpoint.h"

namespace specd {
namespace {

std::string SharedData(const std::string& rel) { return std::string(SPECD_SHARED_DATA) + "/" + rel; }

TEST(GgufVocabTest, ReadsSpmVocabOnlyFile) {
  const std::string path = SharedData("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
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
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  auto v = ReadGgufVocab(path);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->model, "gpt2");
  EXPECT_EQ(v->tokens.size(), 50257u);
  EXPECT_EQ(v->merges.size(), 50000u);
  EXPECT_EQ(v->tokens[0], "!");
  EXPECT_EQ(v->merges[0], "\u0120 t");
}

TEST(GgufVocabTest, MissingFileIsNotFound) {
  auto v = ReadGgufVocab("/nonexistent/vocab.gguf");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_NE(v.status().message().find("/nonexistent/vocab.gguf"), std::string::npos);
}

}  // namespace
}  // namespace specd
