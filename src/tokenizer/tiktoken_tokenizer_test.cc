// tiktoken rank files against the independent reference, OpenAI's tiktoken
// (tests/python/tiktoken_reference.py in the project's .venv): a rank file
// derived from Llama 3's tokenizer.json (../shared/data), encoded with Llama
// 3's pattern and with Kimi-K2's (tiktoken compiles Kimi's `&&` classes
// itself; specd runs them rewritten for PCRE2). The rewriting is also checked
// piece by piece against Python's `regex` module (V1 set operations), and
// the loader against specd's own tokenizer.json loader on the same texts.
#include "tokenizer/tiktoken_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "base/test_reference.h"
#include "tokenizer/regex.h"
#include "tokenizer/tiktoken_pattern.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/utf8.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
}

// One folder per test process, removed at exit.
std::string NewTempDir(const std::string& name) {
  struct Root {
    std::string path = ::testing::TempDir() + "/specd_tiktoken_" + std::to_string(getpid());
    ~Root() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Root root;
  const std::string dir = root.path + "/" + name;
  fs::create_directories(dir);
  return dir;
}

// Runs `cmd` (stdin from a file), returns its stdout; "" with *why on failure.
std::string RunCommand(const std::string& cmd, std::string* why) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *why = "cannot run " + cmd;
    return "";
  }
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0 || out.empty()) {
    *why = "'" + cmd + "' failed: exit status " + std::to_string(rc);
    return "";
  }
  return out;
}

std::string ReferenceCommand(const std::string& args) {
  return "'" + ::specd::testing::ReferencePython() + "' '" + SPECD_SOURCE_DIR +
         "/tests/python/tiktoken_reference.py' " + args;
}

std::string WriteTexts(const std::vector<std::string>& texts) {
  const std::string path = NewTempDir("io") + "/texts.json";
  WriteFile(path, json(texts).dump(-1, ' ', false, json::error_handler_t::replace));
  return path;
}

// ---------------------------------------------------------------------------
// Corpus

const std::vector<std::string>& HandPicked() {
  static const std::vector<std::string> kTexts = [] {
    std::vector<std::string> t = tok::testing::CommonHardTexts();
    for (const char* s : {
             // Han next to Latin and other letters: Kimi's pattern cuts Han runs
             // out of letter runs.
             "Hello世界World's 中文abc",
             "中文English混合text，再来一些English。",
             "A中B文C",
             "ÀÉÎ中文abc DEF漢字ghi",
             "中文's 中文'S CamelCase中文",
             "カタカナとひらがなと漢字とラテン文字Latin",
             "〇々ー、。〈括弧〉「引用」",
             "ǅungla ǈudi Ǌ title case",      // Lt
             "ʰʲʷ modifier letters ˈstress",  // Lm
             "한국어中文日本語",
             "e\u0301中a\u0308文",
             "１２３４５ fullwidth digits and ＡＢＣ letters",
             "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
             "<|eot_id|><|eot_id|>text<|end_of_text|>",
             "<|begin_of_text|> leading space",
             "<|reserved_special_token_5|> and <|not_a_special|>",
         }) {
      t.push_back(s);
    }
    return t;
  }();
  return kTexts;
}

// Random strings from pieces that stress pre-tokenizer boundaries, with Han
// and CJK punctuation mixed into Latin. No U+0085 or U+FEFF (where \s
// definitions differ between regex engines).
std::vector<std::string> RandomTexts(int n, uint32_t seed) {
  static const char* const kAtoms[] = {"a",        "Z",          "the",
                                       " quick",   "Brown",      "fox",
                                       "'s",       "'T",         "'re",
                                       "'ll",      "'d",         " ",
                                       "  ",       "\n",         "\r\n",
                                       "\t",       "0",          "12",
                                       "345",      "6789",       ".",
                                       ",",        "!",          "?",
                                       "-",        "(",          ")",
                                       "{",        "}",          "_",
                                       "=",        "\"",         "'",
                                       "/",        "#",          "é",
                                       "ß",        "ü",          "日本",
                                       "中文",     "漢",         "。",
                                       "，",       "、",         "ー",
                                       "カ",       "한",         "Ж",
                                       "ω",        "ب",          "क",
                                       "ก",        "🦙",       "😀",
                                       "👍🏽", "‍",        "\u00a0",
                                       "\u3000",   "e\u0301",    "\u0301",
                                       "ǅ",        "ʰ",          "Ａ",
                                       "３",       "<",          ">",
                                       "|",        "<|eot_id|>", "<|begin_of_text|>",
                                       "\u2028",   "\u200b"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(1, 24);
  std::uniform_int_distribution<size_t> pick(0, std::size(kAtoms) - 1);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    for (int k = len(rng); k > 0; --k) s += kAtoms[pick(rng)];
    out.push_back(s);
  }
  return out;
}

const std::vector<std::string>& Corpus() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t = HandPicked();
    for (auto& s : RandomTexts(300, 20240601)) t.push_back(std::move(s));
    return t;
  }();
  return texts;
}

// ---------------------------------------------------------------------------
// Fixture: a rank file derived from Llama 3's tokenizer.json by the
// reference script, in two folders that differ only in tokenizer_config.json:
// "llama3" (no pat_str: the default pattern) and "kimi" (auto_map naming
// tokenization_kimi: Kimi's pattern).

std::string Llama3Json() {
  return std::string(SPECD_SHARED_DATA) + "/tokenizers/llama3/tokenizer.json";
}

struct Derived {
  std::string llama3_dir, kimi_dir;  // each holds tiktoken.model + tokenizer_config.json
  std::string specials_json;         // {"content": id}
  std::string why;                   // non-empty: reference unavailable
};

const Derived& DerivedFixture() {
  static const Derived d = [] {
    Derived r;
    if (!fs::exists(Llama3Json())) {
      r.why = "shared data absent: " + Llama3Json();
      return r;
    }
    r.why = ::specd::testing::PythonModuleMissing("tiktoken");
    if (!r.why.empty()) return r;
    r.llama3_dir = NewTempDir("llama3");
    r.kimi_dir = NewTempDir("kimi");
    r.specials_json = r.llama3_dir + "/specials.json";
    const std::string ranks = r.llama3_dir + "/tiktoken.model";
    if (RunCommand(ReferenceCommand("from-hf '" + Llama3Json() + "' '" + ranks + "' '" +
                                    r.specials_json + "' && echo ok"),
                   &r.why)
            .empty()) {
      return r;
    }
    fs::copy_file(ranks, r.kimi_dir + "/tiktoken.model", fs::copy_options::overwrite_existing);
    std::ifstream f(r.specials_json);
    const json specials = json::parse(f);
    json config;
    config["added_tokens_decoder"] = json::object();
    for (const auto& [content, id] : specials.items()) {
      config["added_tokens_decoder"][std::to_string(id.get<int>())] = {{"content", content},
                                                                       {"special", true}};
    }
    config["bos_token"] = "<|begin_of_text|>";
    config["eos_token"] = {{"content", "<|end_of_text|>"}};
    WriteFile(r.llama3_dir + "/tokenizer_config.json", config.dump(1));
    config["auto_map"] = {{"AutoTokenizer", {"tokenization_kimi.TikTokenTokenizer", nullptr}}};
    WriteFile(r.kimi_dir + "/tokenizer_config.json", config.dump(1));
    return r;
  }();
  return d;
}

struct Reference {
  std::vector<int32_t> ids;
  std::string decoded;
};

// tiktoken's output for the corpus, once per (pattern, allow_special).
const std::vector<Reference>& TiktokenReference(const std::string& pattern_name, bool allow_special,
                                                std::string* why) {
  static std::map<std::pair<std::string, bool>, std::pair<std::vector<Reference>, std::string>>
      cache;
  const auto key = std::make_pair(pattern_name, allow_special);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const Derived& d = DerivedFixture();
    std::vector<Reference> refs;
    std::string reason = d.why;
    if (reason.empty()) {
      const std::string pattern_file = NewTempDir("io") + "/" + pattern_name + ".pat";
      WriteFile(pattern_file,
                pattern_name == "kimi" ? tok::kKimiK2Pattern : tok::kLlama3TiktokenPattern);
      const std::string out = RunCommand(
          ReferenceCommand("encode '" + d.llama3_dir + "/tiktoken.model' '" + pattern_file + "' '" +
                           d.specials_json + "'" + (allow_special ? " --allow-special" : "") +
                           " < '" + WriteTexts(Corpus()) + "'"),
          &reason);
      if (!out.empty()) {
        for (const auto& item : json::parse(out)) {
          refs.push_back(
              {item["ids"].get<std::vector<int32_t>>(), item["decoded"].get<std::string>()});
        }
      }
    }
    it = cache.emplace(key, std::make_pair(std::move(refs), reason)).first;
  }
  *why = it->second.second;
  return it->second.first;
}

// Loaded once per folder (a 128k vocabulary takes a second or two);
// tokenizers are immutable and thread-safe, so tests share them.
std::shared_ptr<const Tokenizer> LoadOrNull(const std::string& dir) {
  static std::map<std::string, std::shared_ptr<const Tokenizer>> cache;
  auto it = cache.find(dir);
  if (it != cache.end()) return it->second;
  auto tok = LoadTokenizerForModel(dir);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) return nullptr;
  return cache.emplace(dir, std::move(tok).value()).first->second;
}

// ---------------------------------------------------------------------------
// specd vs tiktoken

struct RefCase {
  const char* pattern;  // "llama3" or "kimi"
  bool parse_special;
};

class TiktokenReferenceTest : public ::testing::TestWithParam<RefCase> {};

TEST_P(TiktokenReferenceTest, EncodeMatchesTiktoken) {
  const RefCase rc = GetParam();
  std::string why;
  const auto& refs = TiktokenReference(rc.pattern, rc.parse_special, &why);
  if (refs.empty()) SPECD_REFERENCE_MISSING(why);
  const auto& texts = Corpus();
  ASSERT_EQ(refs.size(), texts.size());
  const Derived& d = DerivedFixture();
  auto tok = LoadOrNull(std::string(rc.pattern) == "kimi" ? d.kimi_dir : d.llama3_dir);
  ASSERT_NE(tok, nullptr);
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tok->Encode(texts[i], /*add_special=*/false, rc.parse_special);
    if (ids != refs[i].ids && ++mismatches <= 10) {
      ADD_FAILURE() << rc.pattern << " text #" << i << " '" << texts[i]
                    << "'\n  specd:   " << IdsToString(ids)
                    << "\n  tiktoken:" << IdsToString(refs[i].ids);
    }
    const std::string decoded = tok->Decode(ids, /*skip_special=*/false);
    if (decoded != refs[i].decoded && ++mismatches <= 10) {
      ADD_FAILURE() << rc.pattern << " text #" << i << " decodes to '" << decoded << "', tiktoken '"
                    << refs[i].decoded << "'";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts";
}

INSTANTIATE_TEST_SUITE_P(Patterns, TiktokenReferenceTest,
                         ::testing::Values(RefCase{"llama3", true}, RefCase{"llama3", false},
                                           RefCase{"kimi", true}, RefCase{"kimi", false}),
                         [](const auto& info) {
                           return std::string(info.param.pattern) +
                                  (info.param.parse_special ? "_special" : "_plain");
                         });

// The derived rank file and Llama 3's tokenizer.json are one vocabulary in
// two formats: the same ids, pieces and special tokens.
TEST(TiktokenTokenizerTest, SameAsTokenizerJsonLoaderOnLlama3) {
  const Derived& d = DerivedFixture();
  if (!d.why.empty()) SPECD_REFERENCE_MISSING(d.why);
  const auto t0 = std::chrono::steady_clock::now();
  auto loaded = LoadTokenizerForModel(d.llama3_dir);  // not cached: timed
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto& tiktoken = *loaded;
  const auto t1 = std::chrono::steady_clock::now();
  auto hf = LoadHfTokenizer(fs::path(Llama3Json()).parent_path().string());
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("[ INFO     ] load: tiktoken.model %.2f s, tokenizer.json %.2f s\n",
              std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  ASSERT_NE(tiktoken, nullptr);
  const Tokenizer& json_tok = **hf;
  ASSERT_EQ(tiktoken->vocab_size(), json_tok.vocab_size());
  int piece_mismatches = 0;
  for (int32_t id = 0; id < json_tok.vocab_size(); ++id) {
    if ((tiktoken->IdToPiece(id) != json_tok.IdToPiece(id) ||
         tiktoken->TokenBytes(id, false) != json_tok.TokenBytes(id, false) ||
         tiktoken->IsSpecial(id) != json_tok.IsSpecial(id)) &&
        ++piece_mismatches <= 5) {
      ADD_FAILURE() << "id " << id << ": '" << tiktoken->IdToPiece(id) << "' vs '"
                    << json_tok.IdToPiece(id) << "'";
    }
  }
  EXPECT_EQ(tiktoken->bos_id(), json_tok.bos_id());
  EXPECT_EQ(tiktoken->eos_id(), json_tok.eos_id());
  EXPECT_EQ(tiktoken->stop_ids(), json_tok.stop_ids());
  int mismatches = 0;
  for (const std::string& text : Corpus()) {
    for (bool add_special : {false, true}) {
      for (bool parse_special : {false, true}) {
        const auto a = tiktoken->Encode(text, add_special, parse_special);
        const auto b = json_tok.Encode(text, add_special, parse_special);
        if (a != b && ++mismatches <= 10) {
          ADD_FAILURE() << "'" << text << "' add_special " << add_special << " parse_special "
                        << parse_special << "\n  tiktoken.model: " << IdsToString(a)
                        << "\n  tokenizer.json: " << IdsToString(b);
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(TiktokenTokenizerTest, DecodeRoundTripAndStreaming) {
  const Derived& d = DerivedFixture();
  if (!d.why.empty()) SPECD_REFERENCE_MISSING(d.why);
  for (const std::string& dir : {d.llama3_dir, d.kimi_dir}) {
    auto tok = LoadOrNull(dir);
    ASSERT_NE(tok, nullptr);
    for (const std::string& text : Corpus()) {
      const auto ids = tok->Encode(text, /*add_special=*/true);
      EXPECT_EQ(tok->Decode(ids, /*skip_special=*/false), text) << dir;
      StreamDecoder stream(tok.get());
      std::string streamed;
      for (int32_t id : ids) streamed += stream.Push(id);
      streamed += stream.Flush();
      EXPECT_EQ(streamed, tok->Decode(ids)) << dir << ": '" << text << "'";
    }
    // Special tokens: one id when parsed, plain text otherwise, dropped by
    // a skip_special decode.
    const std::string chat = "<|start_header_id|>user<|end_header_id|>";
    const auto parsed = tok->Encode(chat, false, true);
    ASSERT_EQ(parsed.size(), 3u);
    EXPECT_TRUE(tok->IsSpecial(parsed[0]));
    EXPECT_EQ(tok->Decode(parsed), "user");
    EXPECT_GT(tok->Encode(chat, false, false).size(), 3u);
    EXPECT_EQ(tok->Decode(tok->Encode(chat, false, false)), chat);
  }
}

TEST(TiktokenTokenizerTest, KimiRuleAndDefaults) {
  const Derived& d = DerivedFixture();
  if (!d.why.empty()) SPECD_REFERENCE_MISSING(d.why);
  auto llama = LoadOrNull(d.llama3_dir), kimi = LoadOrNull(d.kimi_dir);
  ASSERT_TRUE(llama && kimi);
  // Llama 3's pattern keeps the space before a Han run (" 中文"); Kimi's
  // cuts the Han run out (" ", "中文").
  const std::string mixed = "hello 中文";
  EXPECT_NE(llama->Encode(mixed, false), kimi->Encode(mixed, false));
  EXPECT_EQ(llama->IdToPiece(llama->bos_id()), "<|begin_of_text|>");
  EXPECT_EQ(kimi->IdToPiece(kimi->eos_id()), "<|end_of_text|>");
  const auto stops = llama->stop_ids();
  EXPECT_NE(std::find(stops.begin(), stops.end(), llama->Encode("<|eot_id|>", false)[0]),
            stops.end());
}

// ---------------------------------------------------------------------------
// Pattern rewriting

std::vector<std::string> Split(const std::string& pattern, const std::string& text) {
  auto translated = tok::TranslateClassSetOperations(pattern);
  EXPECT_TRUE(translated.ok()) << translated.status().ToString();
  if (!translated.ok()) return {};
  auto re = tok::Regex::Compile(*translated);
  EXPECT_TRUE(re.ok()) << re.status().ToString();
  if (!re.ok()) return {};
  std::vector<std::string> out;
  (*re)->FindAll(text, [&](size_t s, size_t e) { out.push_back(text.substr(s, e - s)); });
  return out;
}

std::string Translate(const std::string& pattern) {
  auto t = tok::TranslateClassSetOperations(pattern);
  return t.ok() ? *t : "ERROR: " + t.status().ToString();
}

TEST(TiktokenPatternTest, RewritesIntersections) {
  EXPECT_EQ(Translate(R"([\p{L}&&[^\p{Han}]]+)"), R"((?:(?=[^\p{sc:Han}])[\p{L}])+)");
  EXPECT_EQ(Translate(R"([a-z&&[^aeiou]&&[^x]])"), R"((?:(?=[^aeiou])(?=[^x])[a-z]))");
  EXPECT_EQ(Translate("[a[bc]]"), "(?:[a]|[bc])");
  EXPECT_EQ(Translate("[^a&&b]"), R"((?:(?!(?:(?=[b])[a]))[\s\S]))");
  EXPECT_EQ(Translate("[a&&^b]"), R"((?:(?=[\^b])[a]))");
  EXPECT_EQ(Translate(R"([\p{L}&&[\p{Lu}&&[^A-C]]])"), R"((?:(?=(?:(?=[^A-C])[\p{Lu}]))[\p{L}]))");
}

TEST(TiktokenPatternTest, CopiesEverythingElse) {
  for (const char* p :
       {tok::kLlama3TiktokenPattern, R"([^\s\p{L}\p{N}]+)", "[]a]", R"([\]&]&&x)", "[a&b]",
        R"([[:alpha:]]+)", R"(\[a&&b\])", R"(\p{L}\x{4E00}[\x{4E00}-\x{9FFF}])", R"(\Q[&&]\E)",
        "(?i:'s|'t)", "[^]]"}) {
    EXPECT_EQ(Translate(p), p);
  }
}

TEST(TiktokenPatternTest, ScriptNamesMeanScript) {
  EXPECT_EQ(Translate(R"(\p{Han}+[^\P{Latin}\p{Lu}]\p{L}\p{Lu}\p{Alphabetic}\p{sc:Greek})"),
            R"(\p{sc:Han}+[^\P{sc:Latin}\p{Lu}]\p{L}\p{Lu}\p{Alphabetic}\p{sc:Greek})");
  // U+3002 and U+3001 have Script=Common (Script_Extensions include Han).
  using V = std::vector<std::string>;
  EXPECT_EQ(Split(R"(\p{Han}+)", "中文。、漢"), (V{"中文", "漢"}));
}

TEST(TiktokenPatternTest, RejectsMalformedClasses) {
  for (const char* p : {"[a&&b", "[&&a]", "[a&&]", "[a[b]", "abc\\", R"([\p{L)"}) {
    auto t = tok::TranslateClassSetOperations(p);
    ASSERT_FALSE(t.ok()) << p;
    EXPECT_NE(t.status().message().find("offset"), std::string::npos) << t.status().ToString();
  }
}

TEST(TiktokenPatternTest, IntersectionsMatchOneCharacter) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Split(R"([\p{L}&&[^\p{Han}]]+)", "abc中文déf漢x"), (V{"abc", "déf", "x"}));
  EXPECT_EQ(Split(R"([\p{Han}]+|[\p{L}&&[^\p{Han}]]+)", "abc中文déf"), (V{"abc", "中文", "déf"}));
  EXPECT_EQ(Split("[a-z&&[^aeiou]]+", "banana split"), (V{"b", "n", "n", "spl", "t"}));
  EXPECT_EQ(Split("[^a-z&&[^aeiou]]+", "banana"), (V{"a", "a", "a"}));
  EXPECT_EQ(Split("[x[0-9]]+", "ax12x3b"), (V{"x12x3"}));
  EXPECT_EQ(Split(tok::kKimiK2Pattern, "Hello世界World's 中文abc"),
            (V{"Hello", "世界", "World's", " ", "中文", "abc"}));
}

// specd's rewritten Kimi pattern against Python's `regex` module, which runs
// the original `&&` syntax (V1), piece by piece on the corpus.
TEST(TiktokenPatternTest, KimiSplitMatchesPythonRegexV1) {
  const std::string missing = ::specd::testing::PythonModuleMissing("regex");
  if (!missing.empty()) SPECD_REFERENCE_MISSING(missing);
  const std::string pattern_file = NewTempDir("io") + "/kimi_v1.pat";
  WriteFile(pattern_file, tok::kKimiK2Pattern);
  std::string why;
  const std::string out = RunCommand(
      ReferenceCommand("regex-split '" + pattern_file + "' < '" + WriteTexts(Corpus()) + "'"),
      &why);
  if (out.empty()) SPECD_REFERENCE_MISSING(why);
  const json expected = json::parse(out);
  ASSERT_EQ(expected.size(), Corpus().size());
  int mismatches = 0;
  for (size_t i = 0; i < Corpus().size(); ++i) {
    const auto pieces = Split(tok::kKimiK2Pattern, Corpus()[i]);
    if (pieces != expected[i].get<std::vector<std::string>>() && ++mismatches <= 10) {
      ADD_FAILURE() << "text #" << i << " '" << Corpus()[i] << "'\n  specd: " << json(pieces).dump()
                    << "\n  regex: " << expected[i].dump();
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << Corpus().size() << " texts";
}

// ---------------------------------------------------------------------------
// Bad input: errors name the file and line (or key), never abort.

// A rank file of the 256 single bytes plus `extra` lines, as text.
std::string ByteRanks(const std::string& extra = "") {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  for (int b = 0; b < 256; ++b) {
    s += kAlphabet[b >> 2];
    s += kAlphabet[(b & 3) << 4];
    s += "== " + std::to_string(b) + "\n";
  }
  return s + extra;
}

// Writes a folder with tiktoken.model (+ tokenizer_config.json unless
// empty) and loads it.
StatusOr<std::unique_ptr<Tokenizer>> LoadSynthetic(const std::string& name,
                                                   const std::string& ranks,
                                                   const std::string& config = "") {
  const std::string dir = NewTempDir("bad/" + name);
  WriteFile(dir + "/tiktoken.model", ranks);
  if (!config.empty()) WriteFile(dir + "/tokenizer_config.json", config);
  return LoadTokenizerForModel(dir);
}

void ExpectError(const StatusOr<std::unique_ptr<Tokenizer>>& r,
                 const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok());
  for (const std::string& p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().ToString();
  }
}

TEST(TiktokenTokenizerTest, SyntheticVocabularyEncodes) {
  // "ab" = 256, "abc" = 257, "cd" = 258.
  auto r =
      LoadSynthetic("ok", ByteRanks("YWI= 256\nYWJj 257\r\n\nY2Q=\t258\n"),
                    R"({"added_tokens_decoder": {"300": {"content": "<|end|>", "special": true}},
                             "eos_token": "<|end|>"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tokenizer& tok = **r;
  EXPECT_EQ(tok.vocab_size(), 301);
  EXPECT_EQ(tok.eos_id(), 300);
  EXPECT_EQ(tok.Encode("abcd", false), (std::vector<int32_t>{257, 'd'}));
  EXPECT_EQ(tok.Encode("abd<|end|>", false), (std::vector<int32_t>{256, 'd', 300}));
  EXPECT_EQ(tok.Decode({256, 300}, false), "ab<|end|>");
  // Ids above the ranks that no file names are Kimi-style placeholders.
  EXPECT_EQ(tok.IdToPiece(299), "<|reserved_token_299|>");
  EXPECT_TRUE(tok.IsSpecial(299));
  EXPECT_EQ(tok.Encode("ab", /*add_special=*/true), (std::vector<int32_t>{256}));

  auto bos =
      LoadSynthetic("bos", ByteRanks(), R"({"added_tokens_decoder": {"256": {"content": "<s>"}},
                                                   "bos_token": {"content": "<s>"}, "add_bos_token": true})");
  ASSERT_TRUE(bos.ok()) << bos.status().ToString();
  EXPECT_EQ((*bos)->Encode("a", /*add_special=*/true), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ((*bos)->Encode("a", /*add_special=*/false), (std::vector<int32_t>{'a'}));
}

TEST(TiktokenTokenizerTest, RejectsBadRankFiles) {
  ExpectError(LoadSynthetic("base64", ByteRanks("YW!= 256\n")),
              {"tiktoken.model:257:", "invalid base64 character '!'"});
  ExpectError(LoadSynthetic("base64len", ByteRanks("YWJ 256\n")),
              {"tiktoken.model:257:", "not a multiple of 4"});
  ExpectError(LoadSynthetic("duprank", ByteRanks("YWI= 256\nYWJj 256\n")),
              {"tiktoken.model:258:", "duplicate rank 256 (first on line 257)"});
  ExpectError(LoadSynthetic("dupbytes", ByteRanks("YWI= 256\nYWI= 257\n")),
              {"tiktoken.model:258:", "duplicate token"});
  for (const char* rank : {"12a", "-1", "1.5", "99999999999", "0x10"}) {
    ExpectError(LoadSynthetic("rank", ByteRanks(std::string("YWI= ") + rank + "\n")),
                {"tiktoken.model:257:", "is not a decimal integer"});
  }
  ExpectError(LoadSynthetic("fields", ByteRanks("YWI= 256 extra\n")),
              {"tiktoken.model:257:", "found 3 fields"});
  ExpectError(LoadSynthetic("onefield", ByteRanks("YWI=\n")),
              {"tiktoken.model:257:", "found 1 field"});
  ExpectError(LoadSynthetic("empty", ByteRanks("= 256\n")), {"tiktoken.model:257:"});
  ExpectError(LoadSynthetic("nobyte", "YQ== 0\n"), {"tiktoken.model", "single byte 0x00"});
  ExpectError(LoadSynthetic("nothing", ""), {"tiktoken.model", "no ranks"});
}

TEST(TiktokenTokenizerTest, RejectsBadConfigs) {
  ExpectError(
      LoadSynthetic("collide", ByteRanks("YWI= 256\n"),
                    R"({"added_tokens_decoder": {"256": {"content": "<|x|>"}}})"),
      {"tokenizer_config.json", "added_tokens_decoder.256", "'<|x|>'", "tiktoken.model:257"});
  ExpectError(LoadSynthetic("collide_byte", ByteRanks(),
                            R"({"added_tokens_decoder": {"65": {"content": "<|x|>"}}})"),
              {"tiktoken.model:66"});
  ExpectError(LoadSynthetic("badid", ByteRanks(),
                            R"({"added_tokens_decoder": {"x1": {"content": "<|x|>"}}})"),
              {"tokenizer_config.json", "added_tokens_decoder.x1", "not a decimal integer"});
  ExpectError(LoadSynthetic("nocontent", ByteRanks(),
                            R"({"added_tokens_decoder": {"300": {"special": true}}})"),
              {"tokenizer_config.json", "added_tokens_decoder.300"});
  ExpectError(LoadSynthetic("pattern", ByteRanks(), R"({"pat_str": "[a&&b"})"),
              {"tokenizer_config.json", "pat_str", "unterminated"});
  ExpectError(LoadSynthetic("pcre", ByteRanks(), R"({"pat_str": "(a"})"),
              {"tokenizer_config.json", "pat_str"});
  ExpectError(LoadSynthetic("json", ByteRanks(), "{not json"),
              {"tokenizer_config.json", "invalid JSON"});
}

TEST(TiktokenTokenizerTest, MissingFileAndDispatch) {
  auto missing = LoadTiktokenTokenizer(NewTempDir("missing") + "/tiktoken.model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing/tiktoken.model"), std::string::npos)
      << missing.status().ToString();
  // Meta's layout: the rank file named tokenizer.model, told apart from a
  // SentencePiece protobuf by its first line.
  const std::string meta = NewTempDir("meta");
  WriteFile(meta + "/tokenizer.model", ByteRanks("YWI= 256\n"));
  EXPECT_TRUE(LooksLikeTiktokenFile(meta + "/tokenizer.model"));
  auto loaded = LoadTokenizerForModel(meta);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->Encode("ab", false), (std::vector<int32_t>{256}));
  auto direct = LoadTokenizerForModel(meta + "/tokenizer.model");
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  const std::string spm = NewTempDir("spm");
  WriteFile(spm + "/tokenizer.model", std::string("\x0a\x0b\x0a\x05<unk>\x15\x00\x00\x00\x00", 14));
  EXPECT_FALSE(LooksLikeTiktokenFile(spm + "/tokenizer.model"));
}

}  // namespace
}  // namespace specd
