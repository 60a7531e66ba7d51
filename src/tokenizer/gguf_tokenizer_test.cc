// GGUF vocabularies against llama.cpp's test vectors (expected ids from the
// upstream Hugging Face tokenizers) and the aidreams260K golden prompts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/utf8.h"

namespace specd {
namespace {

using tok::testing::IdsToString;
using tok::testing::ReadVocabCases;
using tok::testing::VocabTestDir;

std::unique_ptr<Tokenizer> LoadVocab(const std::string& file) {
  auto tok = LoadTokenizerForModel(file);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

class GgufVocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufVocabTest, MatchesLlamaCppVectors) {
  const std::string name = GetParam();
  const std::string file = VocabTestDir() + "/ggml-vocab-" + name + ".gguf";
  const auto cases = ReadVocabCases(name);
  if (cases.empty()) SPECD_REFERENCE_MISSING("shared data absent: " << file);
  ASSERT_EQ(cases.size(), 46u);
  auto tok = LoadVocab(file);
  ASSERT_NE(tok, nullptr);
  for (const auto& c : cases) {
    // The vectors were made with add_special_tokens=False.
    const auto ids = tok->Encode(c.text, /*add_special=*/false);
    EXPECT_EQ(IdsToString(ids), IdsToString(c.ids)) << "text: '" << c.text << "'";
    // Every vector's text survives a round trip (no unknown characters).
    EXPECT_EQ(tok->Decode(ids), c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, GgufVocabTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2"));

TEST(GgufTokenizerTest, SpmAddsBosAndStripsLeadingSpace) {
  const std::string file = VocabTestDir() + "/ggml-vocab-llama-spm.gguf";
  if (ReadVocabCases("llama-spm").empty()) SPECD_REFERENCE_MISSING("shared data absent: " << file);
  auto tok = LoadVocab(file);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->IsSpecial(1));
  EXPECT_TRUE(tok->strips_leading_space());
  // add_bos_token is true in this file: BOS first, then the text's ids.
  const auto plain = tok->Encode("Hello world", false);
  auto with_bos = tok->Encode("Hello world", true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], 1);
  with_bos.erase(with_bos.begin());
  EXPECT_EQ(with_bos, plain);
  // Control tokens written in the text are one id only with parse_special.
  const auto parsed = tok->Encode("</s>", false, /*parse_special=*/true);
  EXPECT_EQ(parsed, std::vector<int32_t>({2}));
  const auto literal = tok->Encode("</s>", false, /*parse_special=*/false);
  EXPECT_GT(literal.size(), 1u);
  EXPECT_EQ(tok->Decode(literal), "</s>");
  // Decode skips special tokens unless asked not to.
  EXPECT_EQ(tok->Decode(tok->Encode("Hi", true)), "Hi");
  EXPECT_EQ(tok->Decode(tok->Encode("Hi", true), /*skip_special=*/false), "<s> Hi");
}

TEST(GgufTokenizerTest, StreamDecoderNeverSplitsCharacters) {
  const std::string file = VocabTestDir() + "/ggml-vocab-llama-spm.gguf";
  if (ReadVocabCases("llama-spm").empty()) SPECD_REFERENCE_MISSING("shared data absent: " << file);
  auto tok = LoadVocab(file);
  ASSERT_NE(tok, nullptr);
  // Emoji and Khmer are spelled with <0xXX> byte tokens in this vocabulary.
  for (const std::string text : {"🦙 llamas 😶‍🌫️ and ទ", " x", "\n\n", "¡Hola, señor! 😁"}) {
    const auto ids = tok->Encode(text, true);
    StreamDecoder stream(tok.get());
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = stream.Push(id);
      EXPECT_TRUE(tok::IsValidUtf8(piece)) << "after id " << id;
      streamed += piece;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, tok->Decode(ids));
    EXPECT_EQ(streamed, text);
  }
}

TEST(GgufTokenizerTest, Aidreams260KGoldenPrompts) {
  const std::string dir = tok::testing::SharedData() + "/models/aidreams260K";
  auto golden_text = ReadFileToString(dir + "/golden.json");
  if (!golden_text.ok()) SPECD_REFERENCE_MISSING("shared data absent: " << dir);
  auto tok = LoadVocab(dir + "/model-f32.gguf");
  ASSERT_NE(tok, nullptr);
  const auto golden = nlohmann::json::parse(*golden_text);
  EXPECT_EQ(tok->vocab_size(), golden["vocab_size"].get<int>());
  EXPECT_EQ(tok->bos_id(), golden["bos_id"].get<int>());
  EXPECT_EQ(tok->eos_id(), golden["eos_id"].get<int>());
  for (const auto& c : golden["cases"]) {
    const std::string prompt = c["prompt_text"];
    EXPECT_EQ(IdsToString(tok->Encode(prompt, /*add_special=*/true)),
              IdsToString(c["prompt_ids"].get<std::vector<int32_t>>()))
        << "prompt: '" << prompt << "'";
    // generated_text is the generated ids' text as llama2.c prints it while
    // streaming after the prompt: each token's bytes.
    std::string text;
    for (int32_t id : c["generated_ids"].get<std::vector<int32_t>>()) text += tok->TokenBytes(id);
    EXPECT_EQ(text, c["generated_text"].get<std::string>()) << "case " << c["name"];
  }
}

TEST(GgufTokenizerTest, NoVocabIsAClearError) {
  const std::string file = tok::testing::SharedData() + "/models/stories260K/model-f32.gguf";
  if (!std::filesystem::exists(file)) SPECD_REFERENCE_MISSING("shared data absent: " << file);
  auto tok = LoadTokenizerForModel(file);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("no_vocab"), std::string::npos) << tok.status().ToString();
  EXPECT_NE(tok.status().message().find(file), std::string::npos);
}

TEST(GgufTokenizerTest, MissingPathIsNotFound) {
  auto tok = LoadTokenizerForModel("/nonexistent/model");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace specd
