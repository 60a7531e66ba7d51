// One model path, one meaning: a folder holding only a .gguf loads as that
// GGUF and gives the same tokenizer and chat template (the file's
// tokenizer.chat_template) as the file path itself (loader/model_source.h).
#include <gtest/gtest.h>

#include <filesystem>

#include "loader/checkpoint.h"
#include "loader/weight_names.h"
#include "modelgen/fixture.h"
#include "modelgen/gguf_writer.h"
#include "server/chat_prompt.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace specd {
namespace {

namespace fs = std::filesystem;

constexpr char kTemplate[] =
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

// The "tiny" preset as a GGUF with a synthetic SPM vocabulary and a chat
// template in its metadata.
void WriteGgufWithTemplate(const std::string& path) {
  const ModelConfig c = *FixturePreset("tiny");
  const GgufVocab v = SyntheticVocab(c);
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.context_length", 2048);
  w.SetU32("llama.embedding_length", static_cast<uint32_t>(c.hidden_dim));
  w.SetU32("llama.block_count", static_cast<uint32_t>(c.n_layers));
  w.SetU32("llama.feed_forward_length", static_cast<uint32_t>(c.ffn_dim));
  w.SetU32("llama.attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.SetU32("llama.attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.SetF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetU32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));
  w.SetString("tokenizer.ggml.model", v.model);
  w.SetStringArray("tokenizer.ggml.tokens", v.tokens);
  w.SetF32Array("tokenizer.ggml.scores", v.scores);
  w.SetI32Array("tokenizer.ggml.token_type", v.token_types);
  if (v.bos_id >= 0) w.SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  if (v.eos_id >= 0) w.SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetString("tokenizer.chat_template", kTemplate);
  for (const WeightSource& ws : RandomWeights(c, 0)) {
    ASSERT_TRUE(w.AddTensor(HfToGgufName(ws.name), DType::kF32, ws.shape, ws.rows).ok());
  }
  ASSERT_TRUE(w.Write(path).ok());
}

TEST(ModelSourceE2eTest, FolderWithOnlyAGgufIsTheGguf) {
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/model";
  fs::create_directories(dir);
  const std::string file = dir + "/tiny-f32.gguf";
  ASSERT_NO_FATAL_FAILURE(WriteGgufWithTemplate(file));

  auto ck_dir = OpenCheckpoint(dir);
  ASSERT_TRUE(ck_dir.ok()) << ck_dir.status().ToString();
  auto ck_file = OpenCheckpoint(file);
  ASSERT_TRUE(ck_file.ok()) << ck_file.status().ToString();
  EXPECT_EQ((*ck_dir)->format(), "gguf");
  EXPECT_EQ((*ck_dir)->config().vocab_size, (*ck_file)->config().vocab_size);
  EXPECT_EQ((*ck_dir)->tensors().size(), (*ck_file)->tensors().size());

  auto tok_dir = LoadTokenizerForModel(dir);
  ASSERT_TRUE(tok_dir.ok()) << tok_dir.status().ToString();
  auto tok_file = LoadTokenizerForModel(file);
  ASSERT_TRUE(tok_file.ok()) << tok_file.status().ToString();
  EXPECT_EQ((*tok_dir)->vocab_size(), (*tok_file)->vocab_size());
  EXPECT_EQ((*tok_dir)->bos_id(), (*tok_file)->bos_id());
  EXPECT_EQ((*tok_dir)->eos_id(), (*tok_file)->eos_id());
  const std::string text = "t1 t2 t3 hello";
  EXPECT_EQ((*tok_dir)->Encode(text, true), (*tok_file)->Encode(text, true));

  auto chat_dir = server::ChatPrompt::Create(dir, tok_dir->get());
  ASSERT_TRUE(chat_dir.ok()) << chat_dir.status().ToString();
  auto chat_file = server::ChatPrompt::Create(file, tok_file->get());
  ASSERT_TRUE(chat_file.ok()) << chat_file.status().ToString();
  // The GGUF's own template, not the fallback, both ways.
  EXPECT_FALSE((*chat_dir)->is_fallback());
  EXPECT_FALSE((*chat_file)->is_fallback());
  EXPECT_EQ((*chat_dir)->source(), (*chat_file)->source());
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": "hi"}])");
  auto r_dir = (*chat_dir)->Render(messages);
  auto r_file = (*chat_file)->Render(messages);
  ASSERT_TRUE(r_dir.ok()) << r_dir.status().ToString();
  ASSERT_TRUE(r_file.ok()) << r_file.status().ToString();
  EXPECT_EQ(*r_dir, *r_file);
  EXPECT_NE(r_dir->find("[user] hi\n[assistant]"), std::string::npos) << *r_dir;
}

TEST(ModelSourceE2eTest, FolderWithTwoGgufsFailsEverywhereTheSameWay) {
  testing::TempDir tmp;
  ASSERT_NO_FATAL_FAILURE(WriteGgufWithTemplate(tmp.path() + "/a.gguf"));
  fs::copy_file(tmp.path() + "/a.gguf", tmp.path() + "/b.gguf");
  auto ck = OpenCheckpoint(tmp.path());
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kInvalidArgument);
  auto tok = LoadTokenizerForModel(tmp.path());
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tok.status().message().find("name one"), std::string::npos);
}

}  // namespace
}  // namespace specd
