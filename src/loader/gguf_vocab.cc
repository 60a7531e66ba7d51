// tokenizer.ggml.* metadata -> GgufVocab.
#include <fmt/format.h>

#include <cmath>

#include "base/mapped_file.h"
#include "loader/checkpoint.h"
#include "loader/gguf_reader.h"

namespace specd {
namespace {

// Reads an optional integer id key into *id; leaves *id when absent.
Status ReadId(const GgufFile& f, const std::string& key, int* id) {
  if (!f.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  // Some converters write -1 (as int32) or UINT32_MAX for "none".
  if (v < 0 || v == 0xffffffffLL) {
    *id = -1;
    return Status::Ok();
  }
  if (v > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError(fmt::format("{}: key '{}': id {} is out of range", f.path, key, v));
  }
  *id = static_cast<int>(v);
  return Status::Ok();
}

Status ReadFlag(const GgufFile& f, const std::string& key, bool* flag) {
  if (!f.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(*flag, f.GetBool(key));
  return Status::Ok();
}

}  // namespace

Status VocabFromGguf(const GgufFile& f, GgufVocab* vocab) {
  GgufVocab v;
  if (f.Has("tokenizer.ggml.model")) {
    ASSIGN_OR_RETURN(v.model, f.GetString("tokenizer.ggml.model"));
  }
  if (f.Has("tokenizer.ggml.pre")) {
    ASSIGN_OR_RETURN(v.pre, f.GetString("tokenizer.ggml.pre"));
  }
  const bool spm = v.model == "llama";
  if (spm) {
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
  }
  v.add_bos = spm;
  v.add_eos = false;
  v.add_space_prefix = spm;

  if (f.Has("tokenizer.ggml.tokens")) {
    ASSIGN_OR_RETURN(v.tokens, f.GetStringArray("tokenizer.ggml.tokens"));
  }
  const size_t n = v.tokens.size();
  if (f.Has("tokenizer.ggml.scores")) {
    ASSIGN_OR_RETURN(std::vector<double> s, f.GetNumArray("tokenizer.ggml.scores"));
    if (s.size() != n) {
      return CorruptionError(fmt::format(
          "{}: key 'tokenizer.ggml.scores': expected {} entries (one per token), found {}",
          f.path, n, s.size()));
    }
    v.scores.assign(s.begin(), s.end());
  }
  if (f.Has("tokenizer.ggml.token_type")) {
    ASSIGN_OR_RETURN(std::vector<double> t, f.GetNumArray("tokenizer.ggml.token_type"));
    if (t.size() != n) {
      return CorruptionError(fmt::format(
          "{}: key 'tokenizer.ggml.token_type': expected {} entries (one per token), found {}",
          f.path, n, t.size()));
    }
    v.token_types.reserve(n);
    for (double x : t) v.token_types.push_back(static_cast<int32_t>(x));
  }
  if (f.Has("tokenizer.ggml.merges")) {
    ASSIGN_OR_RETURN(v.merges, f.GetStringArray("tokenizer.ggml.merges"));
  }
  RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.bos_token_id", &v.bos_id));
  RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.eos_token_id", &v.eos_id));
  RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.unknown_token_id", &v.unk_id));
  RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.padding_token_id", &v.pad_id));
  RETURN_IF_ERROR(ReadFlag(f, "tokenizer.ggml.add_bos_token", &v.add_bos));
  RETURN_IF_ERROR(ReadFlag(f, "tokenizer.ggml.add_eos_token", &v.add_eos));
  RETURN_IF_ERROR(ReadFlag(f, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
  if (n > 0) {
    const std::pair<const char*, int> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos_id},
                                               {"tokenizer.ggml.eos_token_id", v.eos_id},
                                               {"tokenizer.ggml.unknown_token_id", v.unk_id},
                                               {"tokenizer.ggml.padding_token_id", v.pad_id}};
    for (const auto& [key, id] : ids) {
      if (id >= static_cast<int>(n)) {
        return CorruptionError(fmt::format("{}: key '{}': id {} is outside the vocabulary of {} tokens",
                                           f.path, key, id, n));
      }
    }
  }
  *vocab = std::move(v);
  return Status::Ok();
}

StatusOr<GgufVocab> ReadGgufVocab(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(GgufFile f, ParseGguf(file->data(), file->size(), path, /*with_tensors=*/false));
  GgufVocab vocab;
  RETURN_IF_ERROR(VocabFromGguf(f, &vocab));
  return vocab;
}

}  // namespace specd
