// GGUF tokenizer.ggml.* vocabularies -> TokenizerSpec, and the model-path
// dispatch (folder with tokenizer.json, a tiktoken rank file, or a .gguf
// file).
//
//   "llama": SentencePiece BPE by piece score (llama.cpp's llm_tokenizer_spm):
//            spaces become "▁", "▁" prepended when add_space_prefix, byte
//            fallback to <0xXX>.
//   "gpt2":  byte-level BPE by merge rank with the pre-tokenizer regex that
//            tokenizer.ggml.pre names.
// Control (3) and unknown (2) tokens are special; they and user-defined (4)
// tokens are matched verbatim in the input.
#include <fmt/format.h>

#include "base/logging.h"
#include "tokenizer/core_tokenizer.h"
#include "tokenizer/tiktoken_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace specd {
namespace {

using tok::AddedToken;
using tok::Normalizer;
using tok::PreTokenizer;
using tok::Regex;
using tok::TokenizerSpec;

constexpr int kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4,
              kTypeByte = 6;

// Hugging Face's Split patterns of the models behind each tokenizer.ggml.pre
// value (the same as llama.cpp's regex_exprs for them).
constexpr char kLlama3Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kQwen2Pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct PreConfig {
  std::vector<std::string> patterns;  // applied in order, each Split(Isolated)
  bool ignore_merges = false;
};

PreConfig PreFor(const std::string& pre, const std::string& source) {
  if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "falcon3" ||
      pre == "pixtral") {
    return {{kLlama3Pattern}, true};
  }
  if (pre == "smaug-bpe") return {{kLlama3Pattern}, false};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2" || pre == "megrez") {
    return {{kQwen2Pattern}, false};
  }
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
      pre == "codeshell" || pre == "exaone" || pre == "minerva-7b") {
    return {{"\\p{N}", tok::kGpt2Pattern}, false};
  }
  if (!(pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" ||
        pre == "olmo" || pre == "mpt" || pre == "roberta-bpe" || pre.rfind("jina-", 0) == 0)) {
    LogOnce(LogLevel::kWarn, "gguf-pre:" + pre, "load tokenizer",
            fmt::format("{}: tokenizer.ggml.pre '{}' is not known: using GPT-2's pre-tokenizer, "
                        "so some texts may tokenize differently from the original",
                        source, pre));
  }
  return {{tok::kGpt2Pattern}, false};
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> NewGgufTokenizer(const GgufVocab& vocab,
                                                      const std::string& source) {
  const bool spm = vocab.model == "llama";
  const bool bpe = vocab.model == "gpt2";
  if (!spm && !bpe) {
    if (vocab.model.empty() || vocab.model == "no_vocab" || vocab.model == "none") {
      return NotFoundError(fmt::format("{}: no vocabulary (tokenizer.ggml.model is '{}'); put a "
                                       "tokenizer.json next to the model",
                                       source, vocab.model));
    }
    return UnsupportedError(fmt::format(
        "{}: key 'tokenizer.ggml.model': expected 'llama' or 'gpt2', found '{}'", source, vocab.model));
  }
  const size_t n = vocab.tokens.size();
  if (n == 0) {
    return CorruptionError(fmt::format("{}: key 'tokenizer.ggml.tokens': empty vocabulary", source));
  }
  auto type_of = [&](size_t id) { return id < vocab.token_types.size() ? vocab.token_types[id] : kTypeNormal; };

  TokenizerSpec spec;
  spec.source = source;
  spec.pieces = vocab.tokens;
  spec.token_bytes.assign(n, "");
  spec.special.assign(n, 0);
  for (size_t id = 0; id < n; ++id) {
    const int type = type_of(id);
    if (type == kTypeUnknown || type == kTypeControl || type == kTypeUserDefined) {
      AddedToken t;
      t.content = vocab.tokens[id];
      t.id = static_cast<int32_t>(id);
      t.special = type != kTypeUserDefined;
      if (!t.content.empty()) spec.added.push_back(std::move(t));
    }
    if (type == kTypeUnknown || type == kTypeControl) spec.special[id] = 1;
  }
  for (int id : {vocab.bos_id, vocab.eos_id, vocab.unk_id}) {
    if (id >= 0 && static_cast<size_t>(id) < n && type_of(id) == kTypeNormal) spec.special[id] = 1;
  }

  std::string raw;
  if (spm) {
    if (vocab.add_space_prefix) {
      Normalizer prepend;
      prepend.kind = Normalizer::Kind::kPrepend;
      prepend.content = "\xE2\x96\x81";
      spec.normalizers.push_back(std::move(prepend));
    }
    Normalizer replace;
    replace.kind = Normalizer::Kind::kReplace;
    ASSIGN_OR_RETURN(auto space, Regex::Compile(" ", /*literal=*/true));
    replace.pattern = std::move(space);
    replace.content = "\xE2\x96\x81";
    spec.normalizers.push_back(std::move(replace));
    spec.model = std::make_unique<tok::SpmModel>(vocab.tokens, vocab.scores, vocab.unk_id);
    for (size_t id = 0; id < n; ++id) {
      const std::string& p = vocab.tokens[id];
      const int byte = type_of(id) == kTypeByte ? tok::ParseByteToken(p) : -1;
      std::string& out = spec.token_bytes[id];
      if (byte >= 0) {
        out.assign(1, static_cast<char>(byte));
        continue;
      }
      if (type_of(id) == kTypeControl || type_of(id) == kTypeUnknown) {
        out = p;
        continue;
      }
      for (size_t i = 0; i < p.size();) {
        if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
          out.push_back(' ');
          i += 3;
        } else {
          out.push_back(p[i++]);
        }
      }
    }
    spec.strip_leading_space = vocab.add_space_prefix;
  } else {
    const PreConfig pre = PreFor(vocab.pre, source);
    for (const std::string& pattern : pre.patterns) {
      ASSIGN_OR_RETURN(auto re, Regex::Compile(pattern));
      PreTokenizer p;
      p.kind = PreTokenizer::Kind::kSplit;
      p.pattern = std::move(re);
      p.behavior = tok::SplitBehavior::kIsolated;
      spec.pre_tokenizers.push_back(std::move(p));
    }
    tok::PieceMap model_vocab;
    model_vocab.reserve(n);
    for (size_t id = 0; id < n; ++id) {
      const std::string& p = vocab.tokens[id];
      const int type = type_of(id);
      const bool mapped = type == kTypeNormal && tok::ByteLevelToBytes(p, &raw);
      spec.token_bytes[id] = mapped ? raw : p;
      model_vocab.emplace(spec.token_bytes[id], static_cast<int32_t>(id));
    }
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(vocab.merges.size());
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
      const std::string& m = vocab.merges[i];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) {
        return CorruptionError(fmt::format("{}: key 'tokenizer.ggml.merges'[{}]: expected \"a b\", found \"{}\"",
                                           source, i, m));
      }
      std::string a = m.substr(0, sp), b = m.substr(sp + 1);
      if (tok::ByteLevelToBytes(a, &raw)) a = raw;
      if (tok::ByteLevelToBytes(b, &raw)) b = raw;
      merges.emplace_back(std::move(a), std::move(b));
    }
    tok::BpeOptions options;
    options.byte_units = true;
    options.ignore_merges = pre.ignore_merges;
    options.unk_id = vocab.unk_id;
    size_t skipped = 0;
    spec.model = std::make_unique<tok::BpeModel>(std::move(model_vocab), merges, options, &skipped);
    if (skipped > 0) {
      LOG_WARN("load tokenizer", "{}: {} of {} merges name pieces outside the vocabulary: ignored",
               source, skipped, merges.size());
    }
  }
  auto valid = [&](int id) { return id >= 0 && static_cast<size_t>(id) < n; };
  spec.bos_id = valid(vocab.bos_id) ? vocab.bos_id : -1;
  spec.eos_id = valid(vocab.eos_id) ? vocab.eos_id : -1;
  if (vocab.add_bos && spec.bos_id >= 0) spec.prefix_ids.push_back(spec.bos_id);
  if (vocab.add_eos && spec.eos_id >= 0) spec.suffix_ids.push_back(spec.eos_id);
  tok::FillStopIds(&spec);
  return tok::NewCoreTokenizer(std::move(spec));
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelSource& source) {
  switch (source.tokenizer) {
    case TokenizerKind::kHfJson:
      return LoadHfTokenizer(source.tokenizer_file);
    case TokenizerKind::kTiktoken:
      return LoadTiktokenTokenizer(source.tokenizer_file);
    case TokenizerKind::kGgufVocab: {
      ASSIGN_OR_RETURN(GgufVocab vocab, ReadGgufVocab(source.tokenizer_file));
      return NewGgufTokenizer(vocab, source.tokenizer_file);
    }
    case TokenizerKind::kNone:
      break;
  }
  return NotFoundError(fmt::format("{}: no tokenizer.json, no tiktoken.model and no .gguf file",
                                   source.path));
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const std::string& model_path) {
  ResolveOptions options;
  options.need_weights = false;
  ASSIGN_OR_RETURN(ModelSource source, ResolveModelSource(model_path, options));
  return LoadTokenizer(source);
}

}  // namespace specd
