// tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec.
//
// Supported: model BPE (byte-level or metaspace, byte_fallback, ignore_merges,
// merges as "a b" or [a, b]); normalizers NFC/NFD/NFKC/NFKD, Lowercase,
// Prepend, Replace, Strip, Sequence; pre-tokenizers Split, ByteLevel,
// Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation, Sequence;
// post-processors TemplateProcessing, RobertaProcessing, BertProcessing,
// ByteLevel, Sequence; decoders ByteLevel, Metaspace, Replace, ByteFallback,
// Fuse, Strip, Sequence. Anything else is an Unsupported error naming it.
//
// Added tokens are all matched on the raw input (tokenizers matches
// `normalized: true` ones after normalization; no common model file has
// such a token whose text the normalizer would change).
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "tokenizer/core_tokenizer.h"
#include "tokenizer/json_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace specd {
namespace {

using nlohmann::json;
using tok::AddedToken;
using tok::Normalizer;
using tok::PreTokenizer;
using tok::Regex;
using tok::TokenizerSpec;

// Parse state shared by the section parsers: the file (for messages) and the
// facts later sections need.
struct Ctx {
  std::string file;
  bool byte_level = false;          // ByteLevel pre-tokenizer or decoder seen
  bool decode_byte_level = false;
  bool decode_byte_fallback = false;
  std::string decode_replace_from;  // Replace decoder: "▁"
  std::string decode_replace_to;
  int strip_leading = 0;

  Status Error(StatusCode code, const std::string& key, const std::string& what) const {
    return Status(code, fmt::format("{}: key '{}': {}", file, key, what));
  }
};

std::string Str(const json& j, const char* key, const std::string& def = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}
bool Bool(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

// {"String": s} or {"Regex": r} -> a compiled pattern.
StatusOr<std::shared_ptr<const Regex>> Pattern(const Ctx& ctx, const json& j, const std::string& key) {
  if (j.is_object()) {
    if (j.contains("String") && j["String"].is_string()) {
      ASSIGN_OR_RETURN(auto re, Regex::Compile(j["String"].get<std::string>(), /*literal=*/true));
      return std::shared_ptr<const Regex>(std::move(re));
    }
    if (j.contains("Regex") && j["Regex"].is_string()) {
      auto re = Regex::Compile(j["Regex"].get<std::string>());
      if (!re.ok()) return ctx.Error(StatusCode::kInvalidArgument, key, re.status().message());
      return std::shared_ptr<const Regex>(std::move(re).value());
    }
  }
  return ctx.Error(StatusCode::kInvalidArgument, key,
                   fmt::format("expected {{\"String\": ...}} or {{\"Regex\": ...}}, found {}",
                               j.dump().substr(0, 80)));
}

Status ParseNormalizer(const Ctx& ctx, const json& j, const std::string& key,
                       std::vector<Normalizer>* out) {
  if (j.is_null()) return Status::Ok();
  const std::string type = Str(j, "type");
  if (type == "Sequence") {
    const json& list = j.value("normalizers", json::array());
    for (size_t i = 0; i < list.size(); ++i) {
      RETURN_IF_ERROR(ParseNormalizer(ctx, list[i], fmt::format("{}.normalizers[{}]", key, i), out));
    }
    return Status::Ok();
  }
  Normalizer n;
  if (type == "NFC") n.kind = Normalizer::Kind::kNfc;
  else if (type == "NFD") n.kind = Normalizer::Kind::kNfd;
  else if (type == "NFKC") n.kind = Normalizer::Kind::kNfkc;
  else if (type == "NFKD") n.kind = Normalizer::Kind::kNfkd;
  else if (type == "Lowercase") n.kind = Normalizer::Kind::kLowercase;
  else if (type == "Prepend") {
    n.kind = Normalizer::Kind::kPrepend;
    n.content = Str(j, "prepend");
  } else if (type == "Replace") {
    n.kind = Normalizer::Kind::kReplace;
    ASSIGN_OR_RETURN(n.pattern, Pattern(ctx, j.value("pattern", json()), key + ".pattern"));
    n.content = Str(j, "content");
  } else if (type == "Strip") {
    n.kind = Normalizer::Kind::kStrip;
    n.strip_left = Bool(j, "strip_left", true);
    n.strip_right = Bool(j, "strip_right", true);
  } else {
    return ctx.Error(StatusCode::kUnsupported, key + ".type",
                     fmt::format("normalizer '{}' is not supported", type));
  }
  out->push_back(std::move(n));
  return Status::Ok();
}

StatusOr<tok::SplitBehavior> Behavior(const Ctx& ctx, const json& j, const std::string& key) {
  const std::string b = Str(j, "behavior", "Isolated");
  if (b == "Removed") return tok::SplitBehavior::kRemoved;
  if (b == "Isolated") return tok::SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return tok::SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return tok::SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return tok::SplitBehavior::kContiguous;
  return ctx.Error(StatusCode::kInvalidArgument, key + ".behavior",
                   fmt::format("unknown split behavior '{}'", b));
}

Status AddSplit(const std::string& pattern, tok::SplitBehavior behavior, bool invert,
                std::vector<PreTokenizer>* out) {
  ASSIGN_OR_RETURN(auto re, Regex::Compile(pattern));
  PreTokenizer p;
  p.kind = PreTokenizer::Kind::kSplit;
  p.pattern = std::move(re);
  p.behavior = behavior;
  p.invert = invert;
  out->push_back(std::move(p));
  return Status::Ok();
}

PreTokenizer::Prepend PrependScheme(const json& j) {
  const std::string s = Str(j, "prepend_scheme");
  if (s == "first") return PreTokenizer::Prepend::kFirst;
  if (s == "never") return PreTokenizer::Prepend::kNever;
  if (s.empty() && !Bool(j, "add_prefix_space", true)) return PreTokenizer::Prepend::kNever;
  return PreTokenizer::Prepend::kAlways;
}

Status ParsePreTokenizer(Ctx* ctx, const json& j, const std::string& key,
                         std::vector<PreTokenizer>* out) {
  if (j.is_null()) return Status::Ok();
  const std::string type = Str(j, "type");
  if (type == "Sequence") {
    const json& list = j.value("pretokenizers", json::array());
    for (size_t i = 0; i < list.size(); ++i) {
      RETURN_IF_ERROR(
          ParsePreTokenizer(ctx, list[i], fmt::format("{}.pretokenizers[{}]", key, i), out));
    }
    return Status::Ok();
  }
  PreTokenizer p;
  if (type == "Split") {
    p.kind = PreTokenizer::Kind::kSplit;
    ASSIGN_OR_RETURN(p.pattern, Pattern(*ctx, j.value("pattern", json()), key + ".pattern"));
    ASSIGN_OR_RETURN(p.behavior, Behavior(*ctx, j, key));
    p.invert = Bool(j, "invert", false);
  } else if (type == "ByteLevel") {
    ctx->byte_level = true;
    p.kind = PreTokenizer::Kind::kByteLevel;
    p.add_prefix_space = Bool(j, "add_prefix_space", false);
    if (Bool(j, "use_regex", true)) {
      ASSIGN_OR_RETURN(auto re, Regex::Compile(tok::kGpt2Pattern));
      p.byte_level_regex = std::move(re);
    }
  } else if (type == "Metaspace") {
    p.kind = PreTokenizer::Kind::kMetaspace;
    p.replacement = Str(j, "replacement", p.replacement);
    p.prepend = PrependScheme(j);
    p.split = Bool(j, "split", true);
  } else if (type == "Digits") {
    return AddSplit(Bool(j, "individual_digits", false) ? "\\p{N}" : "\\p{N}+",
                    tok::SplitBehavior::kIsolated, false, out);
  } else if (type == "WhitespaceSplit") {
    return AddSplit("\\s+", tok::SplitBehavior::kRemoved, false, out);
  } else if (type == "Whitespace") {
    return AddSplit("\\w+|[^\\w\\s]+", tok::SplitBehavior::kRemoved, true, out);
  } else if (type == "Punctuation") {
    ASSIGN_OR_RETURN(auto behavior, Behavior(*ctx, j, key));
    return AddSplit("\\p{P}", behavior, false, out);
  } else {
    return ctx->Error(StatusCode::kUnsupported, key + ".type",
                      fmt::format("pre-tokenizer '{}' is not supported", type));
  }
  out->push_back(std::move(p));
  return Status::Ok();
}

void ParseDecoder(Ctx* ctx, const json& j) {
  if (j.is_null()) return;
  const std::string type = Str(j, "type");
  if (type == "Sequence") {
    for (const json& d : j.value("decoders", json::array())) ParseDecoder(ctx, d);
  } else if (type == "ByteLevel") {
    ctx->decode_byte_level = true;
    ctx->byte_level = true;
  } else if (type == "Metaspace") {
    ctx->decode_replace_from = Str(j, "replacement", "\xE2\x96\x81");
    ctx->decode_replace_to = " ";
    if (PrependScheme(j) != PreTokenizer::Prepend::kNever) ctx->strip_leading = 1;
  } else if (type == "Replace") {
    const json& pat = j.value("pattern", json());
    if (pat.is_object() && pat.contains("String")) {
      ctx->decode_replace_from = pat["String"].get<std::string>();
      ctx->decode_replace_to = Str(j, "content");
    }
  } else if (type == "ByteFallback") {
    ctx->decode_byte_fallback = true;
  } else if (type == "Strip") {
    if (Str(j, "content") == " " && j.value("start", 0) > 0) ctx->strip_leading = 1;
  } else if (type != "Fuse") {
    LOG_WARN("load tokenizer", "{}: decoder '{}' is not supported: ignored", ctx->file, type);
  }
}

// Expected ids of a post-processor: what it puts before and after the text.
Status ParsePostProcessor(const Ctx& ctx, const json& j, const std::string& key,
                          const std::function<int32_t(const std::string&)>& lookup,
                          std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  if (j.is_null()) return Status::Ok();
  const std::string type = Str(j, "type");
  if (type == "Sequence") {
    const json& list = j.value("processors", json::array());
    for (size_t i = 0; i < list.size(); ++i) {
      RETURN_IF_ERROR(ParsePostProcessor(ctx, list[i], fmt::format("{}.processors[{}]", key, i),
                                         lookup, prefix, suffix));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") return Status::Ok();
  if (type == "TemplateProcessing") {
    const json& single = j.value("single", json::array());
    const json& specials = j.value("special_tokens", json::object());
    bool seen_a = false;
    for (const json& item : single) {
      if (item.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      if (!item.contains("SpecialToken")) continue;
      const std::string name = Str(item["SpecialToken"], "id");
      std::vector<int32_t> ids;
      if (specials.contains(name) && specials[name].contains("ids")) {
        for (const json& id : specials[name]["ids"]) ids.push_back(id.get<int32_t>());
      } else if (int32_t id = lookup(name); id >= 0) {
        ids.push_back(id);
      } else {
        return ctx.Error(StatusCode::kInvalidArgument, key + ".single",
                         fmt::format("special token '{}' is not in the vocabulary", name));
      }
      auto* dst = seen_a ? suffix : prefix;
      dst->insert(dst->end(), ids.begin(), ids.end());
    }
    return Status::Ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    const json& cls = j.value("cls", json::array());
    const json& sep = j.value("sep", json::array());
    if (cls.size() == 2) prefix->push_back(cls[1].get<int32_t>());
    if (sep.size() == 2) suffix->push_back(sep[1].get<int32_t>());
    return Status::Ok();
  }
  return ctx.Error(StatusCode::kUnsupported, key + ".type",
                   fmt::format("post-processor '{}' is not supported", type));
}

// tokenizer_config.json's "bos_token": "<s>" or {"content": "<s>", ...}.
std::string TokenName(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return Str(*it, "content");
  return "";
}

StatusOr<std::unique_ptr<Tokenizer>> BuildFromJson(const json& root, const json& config, Ctx* ctx) {
  if (!root.is_object()) return CorruptionError(ctx->file + ": expected a JSON object");
  const json& model = root.value("model", json::object());
  const std::string type = Str(model, "type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    return ctx->Error(StatusCode::kUnsupported, "model.type",
                      fmt::format("expected 'BPE', found '{}'", type));
  }
  if (!Str(model, "continuing_subword_prefix").empty() || !Str(model, "end_of_word_suffix").empty()) {
    return ctx->Error(StatusCode::kUnsupported, "model.continuing_subword_prefix",
                      "BPE with subword prefixes/suffixes is not supported");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return ctx->Error(StatusCode::kCorruption, "model.vocab", "missing or not an object");
  }

  TokenizerSpec spec;
  spec.source = ctx->file;
  RETURN_IF_ERROR(ParseNormalizer(*ctx, root.value("normalizer", json()), "normalizer", &spec.normalizers));
  RETURN_IF_ERROR(
      ParsePreTokenizer(ctx, root.value("pre_tokenizer", json()), "pre_tokenizer", &spec.pre_tokenizers));
  ParseDecoder(ctx, root.value("decoder", json()));

  // Ids: the model vocabulary plus added tokens (which may extend it).
  int32_t max_id = -1;
  for (const auto& [piece, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 30)) {
      return ctx->Error(StatusCode::kCorruption, "model.vocab." + piece,
                        fmt::format("expected a non-negative id, found {}", id.dump()));
    }
    max_id = std::max(max_id, id.get<int32_t>());
  }
  const json& added = root.value("added_tokens", json::array());
  for (size_t i = 0; i < added.size(); ++i) {
    AddedToken t;
    t.content = Str(added[i], "content");
    t.id = added[i].value("id", -1);
    if (t.id < 0 || t.content.empty()) {
      return ctx->Error(StatusCode::kCorruption, fmt::format("added_tokens[{}]", i),
                        "expected non-empty 'content' and a non-negative 'id'");
    }
    t.special = Bool(added[i], "special", false);
    t.lstrip = Bool(added[i], "lstrip", false);
    t.rstrip = Bool(added[i], "rstrip", false);
    spec.added.push_back(std::move(t));
  }
  // Older files list some added tokens only in tokenizer_config.json.
  if (config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object()) {
    for (const auto& [id_str, t] : config["added_tokens_decoder"].items()) {
      AddedToken a;
      a.content = Str(t, "content");
      a.id = std::atoi(id_str.c_str());
      if (a.content.empty() || a.id < 0) continue;
      bool known = false;
      for (const AddedToken& b : spec.added) known = known || b.id == a.id;
      if (known) continue;
      a.special = Bool(t, "special", false);
      a.lstrip = Bool(t, "lstrip", false);
      a.rstrip = Bool(t, "rstrip", false);
      spec.added.push_back(std::move(a));
    }
  }
  for (const AddedToken& t : spec.added) max_id = std::max(max_id, t.id);
  const size_t n = static_cast<size_t>(max_id + 1);
  spec.pieces.assign(n, "");
  spec.token_bytes.assign(n, "");
  spec.special.assign(n, 0);

  const bool byte_level = ctx->byte_level;
  tok::PieceMap model_vocab;  // in the model alphabet
  model_vocab.reserve(model["vocab"].size());
  tok::PieceMap by_piece;     // as written, for special-token lookups
  std::string raw;
  for (const auto& [piece, id_json] : model["vocab"].items()) {
    const int32_t id = id_json.get<int32_t>();
    spec.pieces[id] = piece;
    by_piece.emplace(piece, id);
    if (byte_level && tok::ByteLevelToBytes(piece, &raw)) {
      model_vocab.emplace(raw, id);
    } else {
      model_vocab.emplace(piece, id);
    }
  }
  for (const AddedToken& t : spec.added) {
    spec.pieces[t.id] = t.content;
    by_piece.emplace(t.content, t.id);
  }
  auto lookup = [&](const std::string& name) -> int32_t {
    auto it = by_piece.find(name);
    return it == by_piece.end() ? -1 : it->second;
  };

  // Merges: "a b" strings or [a, b] pairs.
  std::vector<std::pair<std::string, std::string>> merges;
  const json& mj = model.value("merges", json::array());
  merges.reserve(mj.size());
  for (size_t i = 0; i < mj.size(); ++i) {
    std::string a, b;
    if (mj[i].is_string()) {
      const std::string s = mj[i].get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) {
        return ctx->Error(StatusCode::kCorruption, fmt::format("model.merges[{}]", i),
                          fmt::format("expected \"a b\", found \"{}\"", s));
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mj[i].is_array() && mj[i].size() == 2 && mj[i][0].is_string() && mj[i][1].is_string()) {
      a = mj[i][0].get<std::string>();
      b = mj[i][1].get<std::string>();
    } else {
      return ctx->Error(StatusCode::kCorruption, fmt::format("model.merges[{}]", i),
                        fmt::format("expected \"a b\" or [a, b], found {}", mj[i].dump()));
    }
    if (byte_level) {
      if (tok::ByteLevelToBytes(a, &raw)) a = raw;
      if (tok::ByteLevelToBytes(b, &raw)) b = raw;
    }
    merges.emplace_back(std::move(a), std::move(b));
  }
  tok::BpeOptions options;
  options.byte_units = byte_level;
  options.byte_fallback = Bool(model, "byte_fallback", false);
  options.ignore_merges = Bool(model, "ignore_merges", false);
  options.fuse_unk = Bool(model, "fuse_unk", false);
  const std::string unk = Str(model, "unk_token");
  if (!unk.empty()) options.unk_id = lookup(unk);
  size_t skipped = 0;
  spec.model = std::make_unique<tok::BpeModel>(std::move(model_vocab), merges, options, &skipped);
  if (skipped > 0) {
    LOG_WARN("load tokenizer", "{}: {} of {} merges name pieces outside the vocabulary: ignored",
             ctx->file, skipped, merges.size());
  }

  // What each id decodes to.
  for (size_t id = 0; id < n; ++id) {
    const std::string& p = spec.pieces[id];
    std::string& out = spec.token_bytes[id];
    int byte = -1;
    if (ctx->decode_byte_level && tok::ByteLevelToBytes(p, &raw)) {
      out = raw;
    } else if (ctx->decode_byte_fallback && (byte = tok::ParseByteToken(p)) >= 0) {
      out.assign(1, static_cast<char>(byte));
    } else if (!ctx->decode_replace_from.empty()) {
      size_t pos = 0;
      out.clear();
      for (size_t f; (f = p.find(ctx->decode_replace_from, pos)) != std::string::npos;) {
        out.append(p, pos, f - pos);
        out += ctx->decode_replace_to;
        pos = f + ctx->decode_replace_from.size();
      }
      out.append(p, pos, std::string::npos);
    } else {
      out = p;
    }
  }
  // Added tokens decode to their text, not through the decoder.
  for (const AddedToken& t : spec.added) {
    spec.token_bytes[t.id] = t.content;
    spec.special[t.id] = t.special ? 1 : 0;
  }
  spec.strip_leading_space = ctx->strip_leading > 0;

  RETURN_IF_ERROR(ParsePostProcessor(*ctx, root.value("post_processor", json()), "post_processor",
                                     lookup, &spec.prefix_ids, &spec.suffix_ids));
  const std::string bos_name = TokenName(config, "bos_token");
  const std::string eos_name = TokenName(config, "eos_token");
  spec.bos_id = bos_name.empty() ? (spec.prefix_ids.empty() ? -1 : spec.prefix_ids.front())
                                 : lookup(bos_name);
  spec.eos_id = eos_name.empty() ? (spec.suffix_ids.empty() ? -1 : spec.suffix_ids.back())
                                 : lookup(eos_name);
  // Files whose post-processor adds nothing rely on tokenizer_config.json.
  if (spec.prefix_ids.empty() && spec.suffix_ids.empty()) {
    if (Bool(config, "add_bos_token", false) && spec.bos_id >= 0) spec.prefix_ids.push_back(spec.bos_id);
    if (Bool(config, "add_eos_token", false) && spec.eos_id >= 0) spec.suffix_ids.push_back(spec.eos_id);
  }
  tok::FillStopIds(&spec);
  return tok::NewCoreTokenizer(std::move(spec));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path json_path = dir, folder = dir;
  if (fs::is_regular_file(json_path, ec)) {
    folder = json_path.parent_path();
  } else {
    json_path = folder / "tokenizer.json";
  }
  Ctx ctx;
  ctx.file = json_path.string();
  ASSIGN_OR_RETURN(json root, tok::ReadJsonFile(ctx.file));
  json config = json::object();
  const fs::path config_path = folder / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    ASSIGN_OR_RETURN(config, tok::ReadJsonFile(config_path.string()));
    if (!config.is_object()) config = json::object();
  }
  try {
    return BuildFromJson(root, config, &ctx);
  } catch (const json::exception& e) {
    // A field of an unexpected JSON type deep inside a section.
    return CorruptionError(fmt::format("{}: unexpected value: {}", ctx.file, e.what()));
  }
}

}  // namespace specd
