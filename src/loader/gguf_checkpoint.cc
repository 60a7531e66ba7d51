// A GGUF model file -> Checkpoint: metadata into ModelConfig, llama.cpp
// tensor names onto HF names, ggml shapes (innermost first) reversed into
// PyTorch order.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/checkpoint_internal.h"
#include "loader/gguf_deepseek2.h"
#include "loader/gguf_reader.h"
#include "loader/weight_names.h"

namespace specd {
namespace {

Status GetIntField(const GgufFile& f, const std::string& key, int* out) {
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return OutOfRangeError(fmt::format("{}: key '{}' = {}: out of range", f.path, key, v));
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status GetIntField(const GgufFile& f, const std::string& key, int def, int* out) {
  if (!f.Has(key)) {
    *out = def;
    return Status::Ok();
  }
  return GetIntField(f, key, out);
}

StatusOr<float> GetFloatField(const GgufFile& f, const std::string& key, float def) {
  if (!f.Has(key)) return def;
  ASSIGN_OR_RETURN(double v, f.GetFloat(key));
  return static_cast<float>(v);
}

// llama.cpp stores Llama 3.1+ RoPE scaling only as the tensor rope_freqs.weight
// (per-pair frequency divisors). Recover the llama3 parameters that produce
// those factors, so the engine computes RoPE one way for both formats.
Status FitLlama3Scaling(const GgufFile& f, const TensorView& t, ModelConfig* c) {
  if (t.dtype != DType::kF32 || t.numel() != c->head_dim / 2) {
    return CorruptionError(fmt::format("{}: tensor 'rope_freqs.weight': expected F32 [{}], found {} {}",
                                       f.path, c->head_dim / 2, DTypeName(t.dtype),
                                       ShapeToString(t.shape)));
  }
  std::vector<float> ff(static_cast<size_t>(t.numel()));
  std::memcpy(ff.data(), t.data, ff.size() * 4);
  float factor = 1.f;
  for (float x : ff) factor = std::max(factor, x);
  const std::string orig_key = c->arch + ".rope.scaling.original_context_length";
  std::vector<int> origs = {8192, 4096, 2048, 16384, 32768, 65536};
  if (f.Has(orig_key)) {
    int v = 0;
    RETURN_IF_ERROR(GetIntField(f, orig_key, &v));
    origs.insert(origs.begin(), v);
  }
  for (int orig : origs) {
    for (auto [low, high] : {std::pair{1.f, 4.f}, std::pair{1.f, 2.f}, std::pair{2.f, 4.f}}) {
      RopeScaling s;
      s.type = "llama3";
      s.factor = factor;
      s.low_freq_factor = low;
      s.high_freq_factor = high;
      s.original_max_position = orig;
      std::vector<float> want = Llama3RopeFreqFactors(c->head_dim, c->rope_theta, s);
      bool match = true;
      for (size_t i = 0; i < ff.size() && match; ++i) {
        match = std::fabs(want[i] - ff[i]) <= 1e-3f * std::max(1.f, std::fabs(ff[i]));
      }
      if (match) {
        c->rope_scaling = s;
        return Status::Ok();
      }
    }
  }
  return UnsupportedError(fmt::format(
      "{}: tensor 'rope_freqs.weight' does not match llama3 RoPE scaling for any standard "
      "parameters (factor {})",
      f.path, factor));
}

Status ConfigFromGguf(const GgufFile& f, const std::map<std::string, TensorView>& tensors,
                      const GgufVocab& vocab, ModelConfig* out) {
  ModelConfig c;
  ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch == "llama") {
    c.rope_style = RopeStyle::kInterleaved;
  } else if (arch == "qwen2") {
    c.qkv_bias = true;
  } else if (arch == "qwen3") {
    c.qk_norm = true;
  } else {
    return UnsupportedError(fmt::format(
        "{}: key 'general.architecture': architecture '{}' is not supported (supported: llama, "
        "qwen2, qwen3, deepseek2)",
        f.path, arch));
  }
  c.arch = arch;
  const std::string p = arch + ".";
  RETURN_IF_ERROR(GetIntField(f, p + "block_count", &c.n_layers));
  RETURN_IF_ERROR(GetIntField(f, p + "embedding_length", &c.hidden_dim));
  RETURN_IF_ERROR(GetIntField(f, p + "feed_forward_length", &c.ffn_dim));
  RETURN_IF_ERROR(GetIntField(f, p + "attention.head_count", &c.n_heads));
  RETURN_IF_ERROR(GetIntField(f, p + "attention.head_count_kv", c.n_heads, &c.n_kv_heads));
  RETURN_IF_ERROR(GetIntField(f, p + "context_length", &c.max_seq_len));
  if (c.n_heads <= 0) {
    return InvalidArgumentError(fmt::format("{}: {}attention.head_count = {}: expected > 0", f.path,
                                            p, c.n_heads));
  }
  RETURN_IF_ERROR(GetIntField(f, p + "attention.key_length", c.hidden_dim / c.n_heads, &c.head_dim));
  if (f.Has(p + "rope.dimension_count")) {
    int rot = 0;
    RETURN_IF_ERROR(GetIntField(f, p + "rope.dimension_count", &rot));
    if (rot != c.head_dim) {
      return UnsupportedError(fmt::format("{}: key '{}rope.dimension_count' = {}: partial rotary "
                                          "embeddings are not supported (expected head_dim {})",
                                          f.path, p, rot, c.head_dim));
    }
  }
  ASSIGN_OR_RETURN(c.norm_eps, GetFloatField(f, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  ASSIGN_OR_RETURN(c.rope_theta, GetFloatField(f, p + "rope.freq_base", 10000.f));

  // Vocabulary size: explicit key, else the token list, else the embedding.
  if (f.Has(p + "vocab_size")) {
    RETURN_IF_ERROR(GetIntField(f, p + "vocab_size", &c.vocab_size));
  } else if (!vocab.tokens.empty()) {
    c.vocab_size = static_cast<int>(vocab.tokens.size());
  } else if (auto it = tensors.find("model.embed_tokens.weight"); it != tensors.end()) {
    c.vocab_size = static_cast<int>(it->second.shape[0]);
  }

  // RoPE scaling: "{arch}.rope.scaling.type" (linear, yarn, none), the legacy
  // "{arch}.rope.scale_linear", or llama3 through rope_freqs.weight.
  std::string scaling = "none";
  if (f.Has(p + "rope.scaling.type")) {
    ASSIGN_OR_RETURN(scaling, f.GetString(p + "rope.scaling.type"));
  }
  if (scaling == "linear") {
    c.rope_scaling.type = "linear";
    ASSIGN_OR_RETURN(c.rope_scaling.factor, GetFloatField(f, p + "rope.scaling.factor", 1.f));
  } else if (scaling != "none") {
    return UnsupportedError(fmt::format("{}: key '{}rope.scaling.type': RoPE scaling '{}' is not "
                                        "supported (supported: none, linear, llama3 via "
                                        "rope_freqs.weight)",
                                        f.path, p, scaling));
  } else if (f.Has(p + "rope.scale_linear")) {
    c.rope_scaling.type = "linear";
    ASSIGN_OR_RETURN(c.rope_scaling.factor, GetFloatField(f, p + "rope.scale_linear", 1.f));
    if (c.rope_scaling.factor == 1.f) c.rope_scaling.type.clear();
  }
  if (auto it = tensors.find("rope_freqs.weight"); it != tensors.end()) {
    if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
      return InvalidArgumentError(fmt::format("{}: head_dim {} must be even", f.path, c.head_dim));
    }
    RETURN_IF_ERROR(FitLlama3Scaling(f, it->second, &c));
  }

  c.tie_embeddings = tensors.count("lm_head.weight") == 0;
  c.bos_id = vocab.bos_id;
  if (vocab.eos_id >= 0) c.eos_ids.push_back(vocab.eos_id);
  // End-of-turn / end-of-message tokens also stop generation.
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!f.Has(key)) continue;
    ASSIGN_OR_RETURN(int64_t id, f.GetInt(key));
    if (id >= 0 && id < c.vocab_size &&
        std::find(c.eos_ids.begin(), c.eos_ids.end(), id) == c.eos_ids.end()) {
      c.eos_ids.push_back(static_cast<int>(id));
    }
  }
  RETURN_IF_ERROR(c.Validate(f.path));
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<CheckpointBuilder>> OpenGgufFile(const std::string& path,
                                                          const LoadOptions& options) {
  auto ck = std::make_unique<CheckpointBuilder>(path, "gguf");
  MapOptions map_options;
  map_options.use_mmap = options.use_mmap;
  map_options.populate = options.populate;
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mf, MappedFile::Open(path, map_options));
  const MappedFile* file = ck->AddFile(std::move(mf));
  ASSIGN_OR_RETURN(GgufFile f, ParseGguf(file->data(), file->size(), path, /*with_tensors=*/true));
  RETURN_IF_ERROR(VocabFromGguf(f, &ck->mutable_vocab()));
  if (auto arch = f.GetString("general.architecture"); arch.ok() && *arch == kDeepseek2Arch) {
    RETURN_IF_ERROR(LoadDeepseek2Gguf(f, file->data(), ck.get()));
    return ck;
  }

  auto& tensors = ck->mutable_tensors();
  for (const GgufTensorInfo& ti : f.tensors) {
    TensorView t;
    t.name = GgufToHfName(ti.name);
    t.dtype = ti.dtype;
    t.shape.assign(ti.ne.rbegin(), ti.ne.rend());
    t.data = file->data() + f.data_offset + ti.offset;
    t.nbytes = ti.nbytes;
    if (!tensors.emplace(t.name, t).second) {
      return CorruptionError(fmt::format("{}: tensor '{}' maps to '{}', which another tensor "
                                         "already has",
                                         path, ti.name, t.name));
    }
  }
  RETURN_IF_ERROR(ConfigFromGguf(f, tensors, ck->gguf_vocab(), &ck->mutable_config()));
  return ck;
}

}  // namespace specd
