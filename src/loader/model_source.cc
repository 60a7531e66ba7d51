#include "loader/model_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"

namespace specd {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool HasGgufMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Whether tokenizer_config.json holds a non-null "chat_template". A file that
// does not parse counts as holding one, so the template loader reports it.
bool ConfigHasChatTemplate(const fs::path& config) {
  auto text = ReadFileToString(config.string());
  if (!text.ok()) return true;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return true;
  auto it = j.find("chat_template");
  return it != j.end() && !it->is_null();
}

// The folder's sources other than the weights: tokenizer, chat template and
// special tokens. `gguf` is the folder's only .gguf ("" if none or several).
void ResolveFolderSideFiles(const fs::path& dir, const std::string& gguf, ModelSource* s) {
  if (s->is_gguf()) {
    // A GGUF is self-contained: the folder gives what the file path gives.
    s->tokenizer = TokenizerKind::kGgufVocab;
    s->tokenizer_file = s->weight_files[0];
    s->chat_template = ChatTemplateKind::kGgufMetadata;
    s->chat_template_file = s->weight_files[0];
    s->special_tokens_file = s->weight_files[0];
    return;
  }
  if (IsFile(dir / "tokenizer.json")) {
    s->tokenizer = TokenizerKind::kHfJson;
    s->tokenizer_file = (dir / "tokenizer.json").string();
  } else if (IsFile(dir / "tiktoken.model")) {
    s->tokenizer = TokenizerKind::kTiktoken;
    s->tokenizer_file = (dir / "tiktoken.model").string();
  } else if (LooksLikeTiktokenRankFile((dir / "tokenizer.model").string())) {
    s->tokenizer = TokenizerKind::kTiktoken;
    s->tokenizer_file = (dir / "tokenizer.model").string();
  } else if (!gguf.empty()) {
    s->tokenizer = TokenizerKind::kGgufVocab;
    s->tokenizer_file = gguf;
  }
  const fs::path config = dir / "tokenizer_config.json";
  if (IsFile(config) && ConfigHasChatTemplate(config)) {
    s->chat_template = ChatTemplateKind::kTokenizerConfig;
    s->chat_template_file = config.string();
  } else if (IsFile(dir / "chat_template.jinja")) {
    s->chat_template = ChatTemplateKind::kJinjaFile;
    s->chat_template_file = (dir / "chat_template.jinja").string();
  } else if (IsFile(dir / "chat_template.json")) {
    s->chat_template = ChatTemplateKind::kJsonFile;
    s->chat_template_file = (dir / "chat_template.json").string();
  } else if (s->tokenizer == TokenizerKind::kGgufVocab) {
    s->chat_template = ChatTemplateKind::kGgufMetadata;
    s->chat_template_file = s->tokenizer_file;
  }
  if (IsFile(config)) {
    s->special_tokens_file = config.string();
  } else if (s->tokenizer == TokenizerKind::kGgufVocab) {
    s->special_tokens_file = s->tokenizer_file;
  }
}

StatusOr<ModelSource> ResolveFolder(const std::string& path, const ResolveOptions& options) {
  const fs::path dir(path);
  ModelSource s;
  s.path = path;
  s.dir = path;
  std::vector<std::string> shards, ggufs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("model-", 0) == 0 && n.find("-of-") != std::string::npos && n.size() > 12 &&
        EndsWith(n, ".safetensors")) {
      shards.push_back(e.path().string());
    }
    if (EndsWith(n, ".gguf")) ggufs.push_back(e.path().string());
  }
  if (ec) return IoError(fmt::format("{}: cannot list the folder: {}", path, ec.message()));
  std::sort(shards.begin(), shards.end());
  std::sort(ggufs.begin(), ggufs.end());
  const std::string only_gguf = ggufs.size() == 1 ? ggufs[0] : "";
  auto several_ggufs = [&] {
    std::string names;
    for (const std::string& g : ggufs) names += (names.empty() ? "" : ", ") + fs::path(g).filename().string();
    return InvalidArgumentError(fmt::format(
        "{}: {} .gguf files in the folder ({}): name one, e.g. {}", path, ggufs.size(), names, ggufs[0]));
  };

  if (IsFile(dir / "model.safetensors.index.json")) {
    s.format = WeightsFormat::kSafetensorsIndex;
    s.index_file = (dir / "model.safetensors.index.json").string();
  } else if (IsFile(dir / "model.safetensors")) {
    s.format = WeightsFormat::kSafetensors;
    s.weight_files = {(dir / "model.safetensors").string()};
  } else if (!shards.empty()) {
    s.format = WeightsFormat::kSafetensorsShards;
    s.weight_files = shards;
  } else if (ggufs.size() == 1) {
    s.format = WeightsFormat::kGguf;
    s.weight_files = ggufs;
  } else if (ggufs.size() > 1 && options.need_weights) {
    return several_ggufs();
  } else if (options.need_weights) {
    return NotFoundError(fmt::format(
        "{}: no weights: no model.safetensors, model.safetensors.index.json or "
        "model-*-of-*.safetensors in the folder, and no .gguf file",
        path));
  }
  if (s.format == WeightsFormat::kGguf) {
    s.config_file = s.weight_files[0];
  } else if (s.format != WeightsFormat::kNone) {
    s.config_file = (dir / "config.json").string();
  }
  ResolveFolderSideFiles(dir, only_gguf, &s);
  // A tokenizer-only folder whose tokenizer could come from one of several
  // GGUF files: ask for one rather than guess.
  if (s.format == WeightsFormat::kNone && s.tokenizer == TokenizerKind::kNone && ggufs.size() > 1) {
    return several_ggufs();
  }
  return s;
}

}  // namespace

const char* WeightsFormatName(WeightsFormat f) {
  switch (f) {
    case WeightsFormat::kNone: return "none";
    case WeightsFormat::kSafetensors: return "safetensors";
    case WeightsFormat::kSafetensorsIndex: return "safetensors (sharded, index)";
    case WeightsFormat::kSafetensorsShards: return "safetensors (sharded)";
    case WeightsFormat::kGguf: return "gguf";
  }
  return "?";
}

const char* TokenizerKindName(TokenizerKind k) {
  switch (k) {
    case TokenizerKind::kNone: return "none";
    case TokenizerKind::kHfJson: return "tokenizer.json";
    case TokenizerKind::kTiktoken: return "tiktoken";
    case TokenizerKind::kGgufVocab: return "gguf vocab";
  }
  return "?";
}

const char* ChatTemplateKindName(ChatTemplateKind k) {
  switch (k) {
    case ChatTemplateKind::kNone: return "none";
    case ChatTemplateKind::kTokenizerConfig: return "tokenizer_config.json";
    case ChatTemplateKind::kJinjaFile: return "chat_template.jinja";
    case ChatTemplateKind::kJsonFile: return "chat_template.json";
    case ChatTemplateKind::kGgufMetadata: return "gguf metadata";
  }
  return "?";
}

std::string ModelSource::Describe() const {
  std::string weights = index_file.empty() ? "" : index_file;
  for (const std::string& f : weight_files) weights += (weights.empty() ? "" : ", ") + f;
  return fmt::format(
      "{}: weights {} [{}]; config {}; tokenizer {} [{}]; chat template {} [{}]; special tokens {}",
      path, WeightsFormatName(format), weights, config_file.empty() ? "-" : config_file,
      TokenizerKindName(tokenizer), tokenizer_file, ChatTemplateKindName(chat_template),
      chat_template_file, special_tokens_file.empty() ? "-" : special_tokens_file);
}

bool LooksLikeTiktokenRankFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.size() > 4096) return false;
    // "<base64> <rank>"
    const size_t sp = line.find(' ');
    if (sp == 0 || sp == std::string::npos || sp + 1 >= line.size()) return false;
    for (size_t i = 0; i < sp; ++i) {
      const unsigned char c = static_cast<unsigned char>(line[i]);
      if (!std::isalnum(c) && c != '+' && c != '/' && c != '=') return false;
    }
    for (size_t i = sp + 1; i < line.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(line[i]))) return false;
    }
    return true;
  }
  return false;
}

StatusOr<ModelSource> ResolveModelSource(const std::string& path, const ResolveOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return NotFoundError(path + ": no such file or folder (expected a model folder or a .gguf file)");
  }
  if (fs::is_directory(st)) return ResolveFolder(path, options);

  ModelSource s;
  s.path = path;
  s.dir = fs::path(path).parent_path().string();
  if (s.dir.empty()) s.dir = ".";
  if (EndsWith(path, ".gguf") || HasGgufMagic(path)) {
    s.format = WeightsFormat::kGguf;
    s.weight_files = {path};
    s.config_file = path;
    s.tokenizer = TokenizerKind::kGgufVocab;
    s.tokenizer_file = path;
    s.chat_template = ChatTemplateKind::kGgufMetadata;
    s.chat_template_file = path;
    s.special_tokens_file = path;
    return s;
  }
  if (!options.need_weights) {
    // A tokenizer file named on its own (`specd tokenize`), with its
    // folder's tokenizer_config.json.
    if (EndsWith(path, ".json")) {
      s.tokenizer = TokenizerKind::kHfJson;
    } else if (LooksLikeTiktokenRankFile(path)) {
      s.tokenizer = TokenizerKind::kTiktoken;
    }
    if (s.tokenizer != TokenizerKind::kNone) {
      s.tokenizer_file = path;
      const fs::path config = fs::path(s.dir) / "tokenizer_config.json";
      if (IsFile(config)) s.special_tokens_file = config.string();
      return s;
    }
  }
  return InvalidArgumentError(fmt::format(
      "{}: expected a model folder (config.json + *.safetensors, or one .gguf) or a .gguf file", path));
}

}  // namespace specd
