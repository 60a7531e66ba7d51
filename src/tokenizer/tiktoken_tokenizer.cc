// tiktoken rank file + tokenizer_config.json -> TokenizerSpec.
//
// Which pre-tokenizer pattern (first that applies):
//   1. tokenizer_config.json "pat_str" (a string, in tiktoken's Rust regex
//      syntax; class set operations are rewritten for PCRE2);
//   2. Kimi's pattern when "auto_map"."AutoTokenizer" names
//      tokenization_kimi (Kimi's config does not carry its pattern: the
//      Python tokenizer class holds it);
//   3. otherwise Llama 3's (Meta's tokenizer.py), logged once at INFO.
#include "tokenizer/tiktoken_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "tokenizer/core_tokenizer.h"
#include "tokenizer/json_file.h"
#include "tokenizer/tiktoken_pattern.h"
#include "tokenizer/utf8.h"

namespace specd {
namespace {

using nlohmann::json;
using tok::AddedToken;
using tok::PreTokenizer;
using tok::Regex;
using tok::TokenizerSpec;

// Ranks and ids must stay below this: a corrupt rank must not size the
// vocabulary tables to gigabytes. Real vocabularies are under 2^18.
constexpr int64_t kMaxId = int64_t{1} << 24;
// tokenization_kimi.py reserves this many ids above the ranks for special
// tokens, naming those tokenizer_config.json leaves out <|reserved_token_ID|>.
constexpr int kKimiReservedSpecials = 256;

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard alphabet with '=' padding. "" on success, else what is wrong.
std::string DecodeBase64(std::string_view in, std::string* out) {
  out->clear();
  if (in.size() % 4 != 0) return fmt::format("base64 length {} is not a multiple of 4", in.size());
  size_t pad = 0;
  if (!in.empty() && in.back() == '=') pad = in[in.size() - 2] == '=' ? 2 : 1;
  uint32_t acc = 0;
  for (size_t i = 0; i < in.size() - pad; ++i) {
    const int v = Base64Value(in[i]);
    if (v < 0) {
      const auto c = static_cast<uint8_t>(in[i]);
      return c >= 0x21 && c < 0x7F
                 ? fmt::format("invalid base64 character '{}' at column {}", in[i], i + 1)
                 : fmt::format("invalid base64 byte 0x{:02X} at column {}", c, i + 1);
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if (i % 4 == 3) {
      out->push_back(static_cast<char>(acc >> 16));
      out->push_back(static_cast<char>(acc >> 8));
      out->push_back(static_cast<char>(acc));
      acc = 0;
    }
  }
  if (pad == 1) {  // 3 symbols -> 2 bytes
    out->push_back(static_cast<char>(acc >> 10));
    out->push_back(static_cast<char>(acc >> 2));
  } else if (pad == 2) {  // 2 symbols -> 1 byte
    out->push_back(static_cast<char>(acc >> 4));
  }
  return "";
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Splits a line into fields separated by runs of blanks.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsBlank(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !IsBlank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// A non-negative decimal below kMaxId, else -1.
int64_t ParseId(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v < kMaxId ? v : -1;
}

// "bos_token": "<s>" or {"content": "<s>", ...}; "" if absent.
std::string TokenName(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

bool ConfigBool(const json& config, const char* key) {
  auto it = config.find(key);
  return it != config.end() && it->is_boolean() && it->get<bool>();
}

bool NamesKimiTokenizer(const json& config) {
  auto am = config.find("auto_map");
  if (am == config.end() || !am->is_object()) return false;
  auto at = am->find("AutoTokenizer");
  if (at == am->end()) return false;
  auto names_kimi = [](const json& v) {
    return v.is_string() && v.get<std::string>().find("tokenization_kimi") != std::string::npos;
  };
  if (names_kimi(*at)) return true;
  if (at->is_array()) return std::any_of(at->begin(), at->end(), names_kimi);
  return false;
}

// GPT-2's printable form of raw bytes ("Ġthe"), so IdToPiece reads like
// the pieces of a byte-level tokenizer.json.
std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  for (char c : bytes) tok::AppendUtf8(tok::ByteToUnicode(static_cast<uint8_t>(c)), &out);
  return out;
}

}  // namespace

StatusOr<std::vector<TiktokenRank>> ParseTiktokenRanks(std::string_view text,
                                                       const std::string& source) {
  std::vector<TiktokenRank> out;
  std::unordered_map<std::string, int> line_of_bytes;
  std::unordered_map<int32_t, int> line_of_rank;
  int line_no = 0;
  std::string bytes;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto fields = Fields(line);
    if (fields.empty()) continue;
    auto error = [&](const std::string& what) {
      return CorruptionError(fmt::format("{}:{}: {}", source, line_no, what));
    };
    if (fields.size() != 2) {
      return error(fmt::format("expected 'base64 rank', found {} field{}", fields.size(),
                               fields.size() == 1 ? "" : "s"));
    }
    const std::string why = DecodeBase64(fields[0], &bytes);
    if (!why.empty()) return error(why);
    if (bytes.empty()) return error("empty token (base64 of zero bytes)");
    const int64_t rank = ParseId(fields[1]);
    if (rank < 0) {
      return error(fmt::format("rank '{}' is not a decimal integer in [0, {})",
                               fields[1].substr(0, 32), kMaxId));
    }
    const auto r = static_cast<int32_t>(rank);
    if (auto [it, fresh] = line_of_rank.emplace(r, line_no); !fresh) {
      return error(fmt::format("duplicate rank {} (first on line {})", r, it->second));
    }
    if (auto [it, fresh] = line_of_bytes.emplace(bytes, line_no); !fresh) {
      return error(fmt::format("duplicate token (the same bytes as line {})", it->second));
    }
    out.push_back({bytes, r, line_no});
  }
  return out;
}

bool LooksLikeTiktokenFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (Fields(line).empty()) continue;
    if (line.size() > 4096) return false;
    return ParseTiktokenRanks(line, path).ok();
  }
  return false;
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTiktokenTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  ASSIGN_OR_RETURN(std::vector<TiktokenRank> ranks, ParseTiktokenRanks(text, path));
  text = std::string();
  if (ranks.empty()) return CorruptionError(fmt::format("{}: no ranks (empty file)", path));
  std::sort(ranks.begin(), ranks.end(),
            [](const TiktokenRank& a, const TiktokenRank& b) { return a.rank < b.rank; });
  const int32_t max_rank = ranks.back().rank;

  std::error_code ec;
  const std::string config_path = (fs::path(path).parent_path() / "tokenizer_config.json").string();
  json config = json::object();
  if (fs::exists(config_path, ec)) {
    ASSIGN_OR_RETURN(config, tok::ReadJsonFile(config_path));
    if (!config.is_object()) return CorruptionError(config_path + ": expected a JSON object");
  } else {
    LogOnce(
        LogLevel::kWarn, "tiktoken-no-config:" + path, "load tokenizer",
        fmt::format("{}: no tokenizer_config.json beside it: no special tokens, no bos/eos", path));
  }

  tok::PieceMap vocab;
  vocab.reserve(ranks.size());
  std::vector<uint8_t> is_rank(static_cast<size_t>(max_rank) + 1, 0);
  for (const TiktokenRank& r : ranks) {
    vocab.emplace(r.bytes, r.rank);
    is_rank[r.rank] = 1;
  }
  for (int b = 0; b < 256; ++b) {
    if (vocab.find(std::string(1, static_cast<char>(b))) == vocab.end()) {
      return CorruptionError(fmt::format(
          "{}: no line for the single byte 0x{:02X}: tiktoken needs a rank for every byte", path,
          b));
    }
  }

  // Special tokens: added_tokens_decoder {"id": {"content", "special", ...}}.
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, std::string> special_at;
  const json atd = config.value("added_tokens_decoder", json::object());
  if (!atd.is_object()) {
    return CorruptionError(
        fmt::format("{}: key 'added_tokens_decoder': expected an object", config_path));
  }
  for (const auto& [id_str, t] : atd.items()) {
    const std::string key = "added_tokens_decoder." + id_str;
    const int64_t id = ParseId(id_str);
    if (id < 0) {
      return CorruptionError(fmt::format("{}: key '{}': id is not a decimal integer in [0, {})",
                                         config_path, key, kMaxId));
    }
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() ||
        t["content"].get<std::string>().empty()) {
      return CorruptionError(fmt::format(
          "{}: key '{}': expected {{\"content\": non-empty string, ...}}", config_path, key));
    }
    AddedToken a;
    a.content = t["content"].get<std::string>();
    a.id = static_cast<int32_t>(id);
    auto flag = [&t](const char* name, bool def) {
      auto it = t.find(name);
      return it != t.end() && it->is_boolean() ? it->get<bool>() : def;
    };
    a.special = flag("special", true);
    a.lstrip = flag("lstrip", false);
    a.rstrip = flag("rstrip", false);
    if (a.id <= max_rank && is_rank[a.id]) {
      const auto r = std::lower_bound(ranks.begin(), ranks.end(), a.id,
                                      [](const TiktokenRank& x, int32_t v) { return x.rank < v; });
      return CorruptionError(
          fmt::format("{}: key '{}': special token '{}' has id {}, which {}:{} gives "
                      "to an ordinary token",
                      config_path, key, a.content, a.id, path, r->line));
    }
    if (auto [it, fresh] = special_at.emplace(a.id, a.content); !fresh) {
      return CorruptionError(fmt::format("{}: key '{}': id {} is given twice ('{}' and '{}')",
                                         config_path, key, a.id, it->second, a.content));
    }
    added.push_back(std::move(a));
  }

  // Pattern (rule in the file comment).
  const bool kimi = NamesKimiTokenizer(config);
  std::string pattern = tok::kLlama3TiktokenPattern;
  std::string pattern_key = "pat_str";
  if (auto it = config.find("pat_str"); it != config.end()) {
    if (!it->is_string()) {
      return CorruptionError(fmt::format("{}: key 'pat_str': expected a string", config_path));
    }
    pattern = it->get<std::string>();
  } else if (kimi) {
    pattern = tok::kKimiK2Pattern;
    pattern_key = "auto_map (Kimi's built-in pattern)";
  } else {
    LogOnce(LogLevel::kInfo, "tiktoken-default-pattern:" + path, "load tokenizer",
            fmt::format("{}: no 'pat_str' in tokenizer_config.json: using Llama 3's pre-tokenizer "
                        "pattern",
                        path));
  }
  auto translated = tok::TranslateClassSetOperations(pattern);
  if (!translated.ok()) {
    return InvalidArgumentError(
        fmt::format("{}: key '{}': {}", config_path, pattern_key, translated.status().message()));
  }
  auto re = Regex::Compile(*translated);
  if (!re.ok()) {
    return InvalidArgumentError(
        fmt::format("{}: key '{}': {}", config_path, pattern_key, re.status().message()));
  }

  TokenizerSpec spec;
  spec.source = path;
  int64_t n = max_rank + 1;
  for (const AddedToken& a : added) n = std::max<int64_t>(n, a.id + 1);
  if (kimi) n = std::max<int64_t>(n, static_cast<int64_t>(ranks.size()) + kKimiReservedSpecials);
  spec.pieces.assign(n, "");
  spec.token_bytes.assign(n, "");
  spec.special.assign(n, 0);
  for (const TiktokenRank& r : ranks) {
    spec.pieces[r.rank] = BytesToByteLevel(r.bytes);
    spec.token_bytes[r.rank] = r.bytes;
  }
  for (const AddedToken& a : added) {
    spec.pieces[a.id] = a.content;
    spec.token_bytes[a.id] = a.content;
    spec.special[a.id] = a.special ? 1 : 0;
  }
  // Ids above the ranks that no file names: tokenization_kimi.py's
  // placeholder special tokens.
  for (int64_t id = max_rank + 1; id < n; ++id) {
    if (special_at.count(static_cast<int32_t>(id)) != 0) continue;
    AddedToken a;
    a.content = fmt::format("<|reserved_token_{}|>", id);
    a.id = static_cast<int32_t>(id);
    a.special = true;
    spec.pieces[id] = a.content;
    spec.token_bytes[id] = a.content;
    spec.special[id] = 1;
    added.push_back(std::move(a));
  }

  // Every split of a token into two tokens is a merge at the token's rank;
  // splits of one token in (left rank, right rank) order.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::tuple<int32_t, int32_t, size_t>> local;
  for (const TiktokenRank& r : ranks) {
    const std::string_view t = r.bytes;
    local.clear();
    for (size_t k = 1; k < t.size(); ++k) {
      auto l = vocab.find(t.substr(0, k)), rr = vocab.find(t.substr(k));
      if (l != vocab.end() && rr != vocab.end()) local.emplace_back(l->second, rr->second, k);
    }
    std::sort(local.begin(), local.end());
    for (const auto& [lr, rr, k] : local) merges.emplace_back(t.substr(0, k), t.substr(k));
  }
  tok::BpeOptions options;
  options.byte_units = true;
  options.ignore_merges = true;  // tiktoken looks the whole piece up first
  size_t skipped = 0;
  spec.model = std::make_unique<tok::BpeModel>(std::move(vocab), merges, options, &skipped);

  PreTokenizer split;
  split.kind = PreTokenizer::Kind::kSplit;
  split.pattern = std::move(re).value();
  split.invert = true;  // keep the matches, drop the text between them
  split.behavior = tok::SplitBehavior::kRemoved;
  spec.pre_tokenizers.push_back(std::move(split));
  spec.added = std::move(added);

  auto lookup = [&](const char* key) -> int32_t {
    const std::string name = TokenName(config, key);
    if (name.empty()) return -1;
    for (const AddedToken& a : spec.added) {
      if (a.content == name) return a.id;
    }
    LOG_WARN("load tokenizer", "{}: key '{}': '{}' is not in added_tokens_decoder: ignored",
             config_path, key, name);
    return -1;
  };
  spec.bos_id = lookup("bos_token");
  spec.eos_id = lookup("eos_token");
  if (ConfigBool(config, "add_bos_token") && spec.bos_id >= 0)
    spec.prefix_ids.push_back(spec.bos_id);
  if (ConfigBool(config, "add_eos_token") && spec.eos_id >= 0)
    spec.suffix_ids.push_back(spec.eos_id);
  tok::FillStopIds(&spec);
  return tok::NewCoreTokenizer(std::move(spec));
}

}  // namespace specd
