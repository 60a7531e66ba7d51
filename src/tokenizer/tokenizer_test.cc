// Unit tests: UTF-8 and byte-map helpers, regex splitting, and the BPE / SPM
// merge loops against naive reference implementations.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <filesystem>
#include <map>
#include <random>

#include "base/mapped_file.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/word_model.h"

namespace specd::tok {
namespace {

TEST(Utf8Test, ByteMapIsABijection) {
  std::map<uint32_t, int> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = ByteToUnicode(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.emplace(cp, b).second) << "byte " << b;
    EXPECT_EQ(UnicodeToByte(cp), b);
    if (b > ' ' && b <= '~') {
      EXPECT_EQ(cp, static_cast<uint32_t>(b));  // printable ASCII kept
    }
  }
  std::string raw;
  ASSERT_TRUE(ByteLevelToBytes("\xC4\xA0hello\xC4\x8A", &raw));  // "Ġhello\u010a"
  EXPECT_EQ(raw, " hello\n");
  EXPECT_FALSE(ByteLevelToBytes("\xE2\x96\x81", &raw));  // "▁" is outside the map
  EXPECT_EQ(ParseByteToken("<0x0A>"), 10);
  EXPECT_EQ(ParseByteToken("<0xfF>"), 255);
  EXPECT_EQ(ParseByteToken("<0x0G>"), -1);
  EXPECT_EQ(ParseByteToken("0x0A"), -1);
}

// utf8proc's decoder is the independent judge of well-formedness.
bool Utf8procValid(const std::string& s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t i = 0, n = static_cast<utf8proc_ssize_t>(s.size());
  while (i < n) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &cp);
    if (len <= 0) return false;
    i += len;
  }
  return true;
}

TEST(Utf8Test, ValidationAgreesWithUtf8proc) {
  std::mt19937 rng(1);
  // Bytes biased towards lead/continuation bytes so that many strings are
  // near-valid.
  const uint8_t kBytes[] = {'a', 0x80, 0x8F, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0,
                            0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    for (int k = rng() % 6; k >= 0; --k) s.push_back(static_cast<char>(kBytes[rng() % std::size(kBytes)]));
    EXPECT_EQ(IsValidUtf8(s), Utf8procValid(s)) << "iteration " << iter;
    std::string out;
    EXPECT_EQ(AppendValidUtf8(s, false, &out), s.size());
    EXPECT_TRUE(Utf8procValid(out));
    if (Utf8procValid(s)) {
      EXPECT_EQ(out, s);
    }
    // Holding the tail never drops bytes: held + emitted covers the input.
    std::string held_out;
    const size_t used = AppendValidUtf8(s, true, &held_out);
    EXPECT_TRUE(Utf8procValid(held_out));
    EXPECT_LE(s.size() - used, 3u);
  }
}

std::vector<std::string> SplitTexts(const std::string& text, SplitBehavior behavior) {
  PreTokenizer p;
  p.kind = PreTokenizer::Kind::kSplit;
  p.pattern = std::move(Regex::Compile("-", true)).value();
  p.behavior = behavior;
  std::vector<Piece> pieces;
  PreTokenize({p}, text, true, &pieces);
  std::vector<std::string> out;
  for (const Piece& piece : pieces) out.push_back(piece.text);
  return out;
}

// The example of Hugging Face's SplitDelimiterBehavior documentation.
TEST(PipelineTest, SplitBehaviorsMatchTokenizersDocs) {
  using V = std::vector<std::string>;
  const std::string t = "the-final--countdown";
  EXPECT_EQ(SplitTexts(t, SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(SplitTexts(t, SplitBehavior::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(SplitTexts(t, SplitBehavior::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(SplitTexts(t, SplitBehavior::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(SplitTexts(t, SplitBehavior::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
}

// \s follows Oniguruma (what tokenizers uses): Unicode White_Space,
// including NEL and the ideographic space, but not the zero-width space.
TEST(PipelineTest, RegexUsesUnicodeProperties) {
  auto re = Regex::Compile("\\s+|\\p{L}+|\\p{N}");
  ASSERT_TRUE(re.ok()) << re.status().ToString();
  auto count = [&](const std::string& s) {
    std::vector<std::string> m;
    (*re)->FindAll(s, [&](size_t b, size_t e) { m.push_back(s.substr(b, e - b)); });
    return m;
  };
  EXPECT_EQ(count("\xC2\x85\xE3\x80\x80 ").size(), 1u);          // NEL, U+3000, space
  EXPECT_EQ(count("\xE2\x80\x8B").size(), 0u);                   // U+200B
  EXPECT_EQ(count("Stra\xC3\x9F" "e").size(), 1u);               // ß is a letter
  EXPECT_EQ(count("\xD9\xA3\xD9\xA4").size(), 2u);               // Arabic-Indic digits
  // Invalid UTF-8 never matches but does not stop the scan.
  EXPECT_EQ(count("ab\xFF" "cd").size(), 2u);
  auto bad = Regex::Compile("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(unclosed"), std::string::npos);
}

TEST(PipelineTest, NormalizersAndMetaspace) {
  std::vector<Normalizer> nfc(1);
  nfc[0].kind = Normalizer::Kind::kNfc;
  std::string s = "e\xCC\x81";  // e + combining acute
  Normalize(nfc, &s);
  EXPECT_EQ(s, "\xC3\xA9");
  std::vector<Normalizer> lower(1);
  lower[0].kind = Normalizer::Kind::kLowercase;
  s = "\xC3\x89T\xC3\x89";  // ÉTÉ
  Normalize(lower, &s);
  EXPECT_EQ(s, "\xC3\xA9t\xC3\xA9");

  PreTokenizer ms;
  ms.kind = PreTokenizer::Kind::kMetaspace;
  ms.prepend = PreTokenizer::Prepend::kFirst;
  std::vector<Piece> pieces;
  PreTokenize({ms}, "Hey  you", /*first=*/true, &pieces);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].text, "\xE2\x96\x81Hey");
  EXPECT_EQ(pieces[1].text, "\xE2\x96\x81");
  EXPECT_EQ(pieces[2].text, "\xE2\x96\x81you");
  PreTokenize({ms}, "Hey", /*first=*/false, &pieces);  // not at the start: no prefix
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].text, "Hey");
}

// --- merge loops against naive references ---------------------------------

struct RandomVocab {
  std::vector<std::string> pieces;  // id -> piece
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<float> scores;
};

// Alphabet {a, b, c, d} plus pieces formed by random merges of earlier ones.
RandomVocab MakeRandomVocab(std::mt19937& rng, int n_merges) {
  RandomVocab v;
  v.pieces = {"a", "b", "c", "d"};
  std::map<std::string, int> index = {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}};
  while (static_cast<int>(v.merges.size()) < n_merges) {
    const std::string& x = v.pieces[rng() % v.pieces.size()];
    const std::string& y = v.pieces[rng() % v.pieces.size()];
    if (x.size() + y.size() > 6) continue;
    const std::string xy = x + y;
    bool dup = false;
    for (const auto& m : v.merges) dup = dup || (m.first == x && m.second == y);
    if (dup) continue;
    v.merges.emplace_back(x, y);
    if (index.emplace(xy, static_cast<int>(v.pieces.size())).second) v.pieces.push_back(xy);
  }
  std::uniform_real_distribution<float> score(-10.0f, 0.0f);
  for (size_t i = 0; i < v.pieces.size(); ++i) v.scores.push_back(score(rng));
  return v;
}

// GPT-2's encoder.py bpe(): merge every occurrence of the lowest-ranked pair
// left to right, until no pair has a rank.
std::vector<std::string> NaiveBpe(const std::string& word, const RandomVocab& v) {
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  for (size_t i = 0; i < v.merges.size(); ++i) ranks.emplace(v.merges[i], i);
  std::vector<std::string> w;
  for (char c : word) w.emplace_back(1, c);
  while (w.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<std::string, std::string> best_pair;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = ranks.find({w[i], w[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        best_pair = it->first;
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<std::string> next;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == best_pair.first && w[i + 1] == best_pair.second) {
        next.push_back(w[i] + w[i + 1]);
        i += 2;
      } else {
        next.push_back(w[i++]);
      }
    }
    w = std::move(next);
  }
  return w;
}

// SentencePiece BPE as a quadratic loop: merge the adjacent pair whose
// concatenation is a piece with the highest score, leftmost on ties.
std::vector<std::string> NaiveSpm(const std::string& word, const RandomVocab& v) {
  std::map<std::string, float> score;
  for (size_t i = 0; i < v.pieces.size(); ++i) score.emplace(v.pieces[i], v.scores[i]);
  std::vector<std::string> w;
  for (char c : word) w.emplace_back(1, c);
  while (true) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = score.find(w[i] + w[i + 1]);
      if (it != score.end() && (best < 0 || it->second > best_score)) {
        best = static_cast<int>(i);
        best_score = it->second;
      }
    }
    if (best < 0) break;
    w[best] += w[best + 1];
    w.erase(w.begin() + best + 1);
  }
  return w;
}

TEST(WordModelTest, BpeAndSpmMatchNaiveLoops) {
  std::mt19937 rng(42);
  for (int vocab_iter = 0; vocab_iter < 20; ++vocab_iter) {
    const RandomVocab v = MakeRandomVocab(rng, 40);
    PieceMap map;
    for (size_t i = 0; i < v.pieces.size(); ++i) map.emplace(v.pieces[i], static_cast<int32_t>(i));
    size_t skipped = 0;
    BpeOptions options;
    options.byte_units = true;
    BpeModel bpe(map, v.merges, options, &skipped);
    EXPECT_EQ(skipped, 0u);
    SpmModel spm(v.pieces, v.scores, -1);
    for (int w = 0; w < 200; ++w) {
      std::string word;
      for (int k = 1 + rng() % 16; k > 0; --k) word.push_back("abcd"[rng() % 4]);
      std::vector<int32_t> ids;
      bpe.Encode(word, &ids);
      std::vector<std::string> got;
      for (int32_t id : ids) got.push_back(v.pieces[id]);
      EXPECT_EQ(got, NaiveBpe(word, v)) << "BPE word " << word;
      ids.clear();
      spm.Encode(word, &ids);
      got.clear();
      for (int32_t id : ids) got.push_back(v.pieces[id]);
      EXPECT_EQ(got, NaiveSpm(word, v)) << "SPM word " << word;
    }
  }
}

// --- loader errors ----------------------------------------------------------

class HfLoadErrorTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& json) {
    const std::string dir = ::testing::TempDir() + "/specd_tok_err";
    std::filesystem::create_directories(dir);
    EXPECT_TRUE(WriteStringToFile(dir + "/tokenizer.json", json).ok());
    return dir;
  }
};

TEST_F(HfLoadErrorTest, ErrorsNameFileAndKey) {
  auto missing = LoadHfTokenizer("/nonexistent/dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);

  auto bad_json = LoadHfTokenizer(Write("{\"model\": "));
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad_json.status().message().find("tokenizer.json"), std::string::npos);

  auto unigram = LoadHfTokenizer(Write(R"({"model": {"type": "Unigram", "vocab": []}})"));
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(unigram.status().message().find("model.type"), std::string::npos);
  EXPECT_NE(unigram.status().message().find("Unigram"), std::string::npos);

  auto bad_regex = LoadHfTokenizer(Write(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(x"}, "behavior": "Isolated"}]}})"));
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.status().message().find("pre_tokenizer.pretokenizers[0].pattern"), std::string::npos)
      << bad_regex.status().ToString();

  auto bad_merge = LoadHfTokenizer(Write(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})"));
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("model.merges[0]"), std::string::npos);
}

// A minimal byte-level file: merges apply, bytes outside the vocabulary are
// dropped (no unk), and the template post-processor adds BOS and EOS.
TEST_F(HfLoadErrorTest, MinimalByteLevelFile) {
  auto tok = LoadHfTokenizer(Write(R"({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4},
              "merges": ["a b", "\u0120 ab"]},
    "added_tokens": [{"id": 5, "content": "<bos>", "special": true},
                     {"id": 6, "content": "<eos>", "special": true}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
      "special_tokens": {"<bos>": {"id": "<bos>", "ids": [5], "tokens": ["<bos>"]},
                         "<eos>": {"id": "<eos>", "ids": [6], "tokens": ["<eos>"]}}}})"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->Encode("ab ab", true), (std::vector<int32_t>{5, 2, 4, 6}));
  EXPECT_EQ((*tok)->Encode("ab<eos>", false), (std::vector<int32_t>{2, 6}));
  EXPECT_EQ((*tok)->Decode({5, 2, 4, 6}), "ab ab");
  EXPECT_EQ((*tok)->Decode({5, 2, 4, 6}, false), "<bos>ab ab<eos>");
  EXPECT_EQ((*tok)->bos_id(), 5);
  EXPECT_EQ((*tok)->eos_id(), 6);
  EXPECT_EQ((*tok)->IdToPiece(4), "\xC4\xA0" "ab");
  EXPECT_EQ((*tok)->TokenBytes(4), " ab");
}

}  // namespace
}  // namespace specd::tok
