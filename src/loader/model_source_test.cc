#include "loader/model_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "loader/checkpoint.h"
#include "modelgen/fixture.h"
#include "loader/test_util.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string MakeGguf(const std::string& path) {
  FixtureOptions o;
  o.format = "gguf";
  o.vocab = "synthetic";
  o.out = path;
  EXPECT_TRUE(MakeFixture(o).ok());
  return path;
}

std::string MakeSafetensors(const std::string& dir) {
  FixtureOptions o;
  o.out = dir;
  EXPECT_TRUE(MakeFixture(o).ok());
  return dir;
}

TEST(ModelSourceTest, GgufFileGivesEverything) {
  TempDir tmp;
  const std::string gguf = MakeGguf(tmp / "m.gguf");
  auto s = ResolveModelSource(gguf);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, WeightsFormat::kGguf);
  EXPECT_EQ(s->weight_files, std::vector<std::string>{gguf});
  EXPECT_EQ(s->config_file, gguf);
  EXPECT_EQ(s->tokenizer, TokenizerKind::kGgufVocab);
  EXPECT_EQ(s->tokenizer_file, gguf);
  EXPECT_EQ(s->chat_template, ChatTemplateKind::kGgufMetadata);
  EXPECT_EQ(s->chat_template_file, gguf);
  EXPECT_EQ(s->special_tokens_file, gguf);
}

TEST(ModelSourceTest, GgufMagicWithoutExtension) {
  TempDir tmp;
  MakeGguf(tmp / "m.gguf");
  fs::rename(tmp / "m.gguf", tmp / "model.bin");
  auto s = ResolveModelSource(tmp / "model.bin");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, WeightsFormat::kGguf);
}

// The bug this resolver fixed: a folder holding only a .gguf passed the
// tokenizer's rule but not the loader's.
TEST(ModelSourceTest, FolderWithOneGgufIsThatGguf) {
  TempDir tmp;
  const std::string gguf = MakeGguf(tmp / "model-q8.gguf");
  auto s = ResolveModelSource(tmp.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, WeightsFormat::kGguf);
  EXPECT_EQ(s->weight_files, std::vector<std::string>{gguf});
  EXPECT_EQ(s->config_file, gguf);
  EXPECT_EQ(s->tokenizer, TokenizerKind::kGgufVocab);
  EXPECT_EQ(s->tokenizer_file, gguf);
  EXPECT_EQ(s->chat_template, ChatTemplateKind::kGgufMetadata);
  EXPECT_EQ(s->chat_template_file, gguf);

  auto from_dir = OpenCheckpoint(tmp.path());
  ASSERT_TRUE(from_dir.ok()) << from_dir.status().ToString();
  auto from_file = OpenCheckpoint(gguf);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ((*from_dir)->format(), "gguf");
  EXPECT_EQ((*from_dir)->config().vocab_size, (*from_file)->config().vocab_size);
  EXPECT_EQ((*from_dir)->config().n_layers, (*from_file)->config().n_layers);
  EXPECT_EQ((*from_dir)->tensors().size(), (*from_file)->tensors().size());
  EXPECT_EQ((*from_dir)->gguf_vocab().tokens, (*from_file)->gguf_vocab().tokens);
}

TEST(ModelSourceTest, FolderWithTwoGgufsAsksForOne) {
  TempDir tmp;
  MakeGguf(tmp / "a-q8_0.gguf");
  MakeGguf(tmp / "b-f16.gguf");
  auto s = ResolveModelSource(tmp.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("a-q8_0.gguf"), std::string::npos) << m;
  EXPECT_NE(m.find("b-f16.gguf"), std::string::npos) << m;
  EXPECT_NE(m.find("name one"), std::string::npos) << m;
  // Naming one works.
  EXPECT_TRUE(ResolveModelSource(tmp / "b-f16.gguf").ok());
  // And the loader says the same.
  auto ck = OpenCheckpoint(tmp.path());
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelSourceTest, HfFolder) {
  TempDir tmp;
  const std::string dir = MakeSafetensors(tmp / "hf");
  WriteText(dir + "/tokenizer.json", "{}");
  WriteText(dir + "/tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": "{{ x }}"})");
  WriteText(dir + "/chat_template.jinja", "ignored: tokenizer_config.json has one");
  auto s = ResolveModelSource(dir);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, WeightsFormat::kSafetensors);
  EXPECT_EQ(s->weight_files, std::vector<std::string>{dir + "/model.safetensors"});
  EXPECT_EQ(s->config_file, dir + "/config.json");
  EXPECT_EQ(s->tokenizer, TokenizerKind::kHfJson);
  EXPECT_EQ(s->tokenizer_file, dir + "/tokenizer.json");
  EXPECT_EQ(s->chat_template, ChatTemplateKind::kTokenizerConfig);
  EXPECT_EQ(s->special_tokens_file, dir + "/tokenizer_config.json");

  // tokenizer_config.json without a template: chat_template.jinja.
  WriteText(dir + "/tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": null})");
  s = ResolveModelSource(dir);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->chat_template, ChatTemplateKind::kJinjaFile);
  EXPECT_EQ(s->chat_template_file, dir + "/chat_template.jinja");

  // A GGUF beside safetensors weights is not the weights, but gives the
  // tokenizer (and its template) when nothing else does.
  fs::remove(dir + "/tokenizer.json");
  fs::remove(dir + "/chat_template.jinja");
  fs::remove(dir + "/tokenizer_config.json");
  const std::string vocab = MakeGguf(dir + "/vocab.gguf");
  s = ResolveModelSource(dir);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->format, WeightsFormat::kSafetensors);
  EXPECT_EQ(s->tokenizer, TokenizerKind::kGgufVocab);
  EXPECT_EQ(s->tokenizer_file, vocab);
  EXPECT_EQ(s->chat_template, ChatTemplateKind::kGgufMetadata);

  auto ck = OpenCheckpoint(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ((*ck)->format(), "safetensors");
}

TEST(ModelSourceTest, ShardedFolders) {
  TempDir tmp;
  WriteText(tmp / "config.json", "{}");
  WriteText(tmp / "model-00002-of-00002.safetensors", "");
  WriteText(tmp / "model-00001-of-00002.safetensors", "");
  auto s = ResolveModelSource(tmp.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, WeightsFormat::kSafetensorsShards);
  EXPECT_EQ(s->weight_files, (std::vector<std::string>{tmp / "model-00001-of-00002.safetensors",
                                                       tmp / "model-00002-of-00002.safetensors"}));
  WriteText(tmp / "model.safetensors.index.json", R"({"weight_map": {}})");
  s = ResolveModelSource(tmp.path());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->format, WeightsFormat::kSafetensorsIndex);
  EXPECT_EQ(s->index_file, tmp / "model.safetensors.index.json");
}

TEST(ModelSourceTest, MissingWeights) {
  TempDir tmp;
  WriteText(tmp / "config.json", "{}");
  WriteText(tmp / "tokenizer.json", "{}");
  auto s = ResolveModelSource(tmp.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("no weights"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("no model.safetensors"), std::string::npos);
  // A tokenizer-only folder still resolves when weights are not needed.
  ResolveOptions o;
  o.need_weights = false;
  s = ResolveModelSource(tmp.path(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->format, WeightsFormat::kNone);
  EXPECT_EQ(s->tokenizer, TokenizerKind::kHfJson);
  EXPECT_EQ(s->chat_template, ChatTemplateKind::kNone);
}

TEST(ModelSourceTest, MissingPathAndOtherFiles) {
  TempDir tmp;
  auto s = ResolveModelSource(tmp / "nope");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("no such file or folder"), std::string::npos);

  WriteText(tmp / "weights.bin", "not a model");
  s = ResolveModelSource(tmp / "weights.bin");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);

  // Tokenizer files alone, when weights are not needed.
  ResolveOptions o;
  o.need_weights = false;
  WriteText(tmp / "tok.json", "{}");
  s = ResolveModelSource(tmp / "tok.json", o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tokenizer, TokenizerKind::kHfJson);
  WriteText(tmp / "tokenizer.model", "IQ== 0\nIg== 1\n");
  s = ResolveModelSource(tmp / "tokenizer.model", o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tokenizer, TokenizerKind::kTiktoken);
  EXPECT_FALSE(ResolveModelSource(tmp / "tokenizer.model").ok());  // no weights
}

TEST(ModelSourceTest, TiktokenSniff) {
  TempDir tmp;
  WriteText(tmp / "a.model", "\nIQ== 0\n");
  EXPECT_TRUE(LooksLikeTiktokenRankFile(tmp / "a.model"));
  WriteText(tmp / "b.model", std::string("\x0a\x05\x3c\x75\x6e\x6b\x3e\x15\x00\x00", 10));
  EXPECT_FALSE(LooksLikeTiktokenRankFile(tmp / "b.model"));
  EXPECT_FALSE(LooksLikeTiktokenRankFile(tmp / "missing.model"));
  // In a folder: tiktoken.model, then a tiktoken tokenizer.model.
  WriteText(tmp / "tokenizer.model", "IQ== 0\n");
  ResolveOptions o;
  o.need_weights = false;
  auto s = ResolveModelSource(tmp.path(), o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tokenizer, TokenizerKind::kTiktoken);
  EXPECT_EQ(s->tokenizer_file, tmp / "tokenizer.model");
}

}  // namespace
}  // namespace specd
