#include "modelgen/model_writer.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/weight_names.h"
#include "modelgen/gguf_deepseek2_writer.h"
#include "modelgen/safetensors_writer.h"

namespace specd {

int64_t HfRowToGgufRow(int64_t hf_row, int64_t rows, int n_head) {
  const int64_t head_dim = rows / n_head, half = head_dim / 2;
  const int64_t h = hf_row / head_dim, w = hf_row % head_dim;
  const int64_t j = w / half, i = w % half;
  return h * head_dim + 2 * i + j;
}

StatusOr<std::vector<WeightSource>> WeightsFromCheckpoint(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  if (c.arch == "llama_eagle3") {
    return UnsupportedError(ck.path() + ": converting EAGLE-3 draft heads is not supported");
  }
  std::vector<WeightSource> out;
  for (const TensorSpec& spec : ExpectedTensors(c)) {
    ASSIGN_OR_RETURN(TensorView t, ck.Get(spec.name, spec.shape));
    int n_head = 0;
    // IsPermutedForGguf is false for MLA models, whose kInterleaved is the
    // model's own RoPE, not a GGUF row permutation.
    const bool unpermute =
        c.rope_style == RopeStyle::kInterleaved && IsPermutedForGguf(spec.name, c, &n_head);
    const int64_t rows = t.rows(), cols = t.cols();
    RowFn fn;
    if (unpermute && t.shape.size() == 1) {  // a bias: permute elements
      fn = [t, n_head, cols](int64_t, float* dst) {
        std::vector<float> g(static_cast<size_t>(cols));
        DequantizeRow(t.dtype, t.data, g.data(), cols);
        for (int64_t r = 0; r < cols; ++r) dst[r] = g[HfRowToGgufRow(r, cols, n_head)];
      };
    } else {
      fn = [t, unpermute, n_head, rows, cols](int64_t r, float* dst) {
        int64_t src = unpermute ? HfRowToGgufRow(r, rows, n_head) : r;
        DequantizeRow(t.dtype, t.row(src), dst, cols);
      };
    }
    out.push_back({spec.name, spec.shape, std::move(fn)});
  }
  return out;
}

namespace {

const char* HfArchitecture(const std::string& arch) {
  if (arch == "llama") return "LlamaForCausalLM";
  if (arch == "mistral") return "MistralForCausalLM";
  if (arch == "qwen2") return "Qwen2ForCausalLM";
  if (arch == "qwen3") return "Qwen3ForCausalLM";
  return nullptr;
}

const char* TorchDtype(DType dtype) {
  return dtype == DType::kBF16 ? "bfloat16" : dtype == DType::kF16 ? "float16" : "float32";
}

// A float as the shortest decimal that reads back as the same float, so
// config.json holds 2.827 rather than 2.8269999027252197.
double ShortestDecimal(float x) { return std::stod(fmt::format("{}", x)); }

// config.json of a DeepSeek-V2/V3 model with the keys transformers'
// DeepseekV2Config / DeepseekV3Config and ParseHfConfig read; for
// tensor_prefix "language_model." the KimiK25ForConditionalGeneration wrapper
// with the text model under text_config.
StatusOr<std::string> DeepseekConfigJson(const ModelConfig& c, DType dtype) {
  const bool v3 = c.arch == "deepseek_v3";
  if (!c.tensor_prefix.empty() && !(v3 && c.tensor_prefix == "language_model.")) {
    return UnsupportedError(fmt::format("cannot write a config.json for {} with tensor prefix '{}' "
                                        "(supported: 'language_model.' for deepseek_v3, as "
                                        "Kimi-K2.5)",
                                        c.arch, c.tensor_prefix));
  }
  const MlaConfig& m = c.mla;
  const MoeConfig& e = c.moe;
  nlohmann::ordered_json j;
  j["architectures"] = {v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
  j["model_type"] = c.arch;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_dim;
  j["intermediate_size"] = c.ffn_dim;
  j["moe_intermediate_size"] = e.expert_ffn_dim;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["n_shared_experts"] = e.n_shared_experts;
  j["n_routed_experts"] = e.n_routed_experts;
  j["routed_scaling_factor"] = ShortestDecimal(e.routed_scaling_factor);
  j["kv_lora_rank"] = m.kv_lora_rank;
  j["q_lora_rank"] = m.q_lora_rank > 0 ? nlohmann::ordered_json(m.q_lora_rank) : nullptr;
  j["qk_rope_head_dim"] = m.qk_rope_head_dim;
  j["v_head_dim"] = m.v_head_dim;
  j["qk_nope_head_dim"] = m.qk_nope_head_dim;
  j["topk_method"] = e.topk_method;
  j["scoring_func"] = e.scoring;
  j["n_group"] = e.n_group;
  j["topk_group"] = e.topk_group;
  j["num_experts_per_tok"] = e.top_k;
  j["moe_layer_freq"] = e.layer_freq;
  // transformers builds MoE layers from first_k_dense_replace on: a dense
  // model has every layer dense.
  j["first_k_dense_replace"] = e.n_routed_experts > 0 ? e.first_k_dense : c.n_layers;
  j["norm_topk_prob"] = e.norm_topk_prob;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = ShortestDecimal(c.norm_eps);
  j["rope_theta"] = ShortestDecimal(c.rope_theta);
  const RopeScaling& y = c.rope_scaling;
  if (y.type == "yarn") {
    nlohmann::ordered_json rs;
    rs["type"] = "yarn";
    rs["rope_type"] = "yarn";
    rs["factor"] = ShortestDecimal(y.factor);
    rs["original_max_position_embeddings"] = y.original_max_position;
    rs["beta_fast"] = ShortestDecimal(y.beta_fast);
    rs["beta_slow"] = ShortestDecimal(y.beta_slow);
    if (y.mscale > 0) rs["mscale"] = ShortestDecimal(y.mscale);
    if (y.mscale_all_dim > 0) rs["mscale_all_dim"] = ShortestDecimal(y.mscale_all_dim);
    if (!y.truncate) rs["truncate"] = false;
    j["rope_scaling"] = rs;
  } else if (y.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    return UnsupportedError(fmt::format("cannot write a config.json for {} with RoPE scaling '{}' "
                                        "(supported: none, yarn)",
                                        c.arch, y.type));
  }
  if (v3) {
    j["rope_interleave"] = c.rope_style == RopeStyle::kInterleaved;
    j["num_nextn_predict_layers"] = 0;  // no multi-token-prediction layers
  } else if (c.rope_style != RopeStyle::kInterleaved) {
    return UnsupportedError("cannot write a DeepseekV2 config.json with rotate_half RoPE "
                            "(DeepseekV2 always rotates interleaved pairs)");
  }
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = c.tie_embeddings;
  if (c.bos_id >= 0) j["bos_token_id"] = c.bos_id;
  if (c.eos_ids.size() == 1) {
    j["eos_token_id"] = c.eos_ids[0];
  } else if (!c.eos_ids.empty()) {
    j["eos_token_id"] = c.eos_ids;
  }
  j["torch_dtype"] = TorchDtype(dtype);
  j["use_cache"] = true;
  if (c.tensor_prefix.empty()) return j.dump(2) + "\n";

  // Kimi-K2.5: the wrapper names the vision tower the fixture's fake
  // vision tensors stand for (KimiK25VisionTensors in modelgen/fixture.h).
  nlohmann::ordered_json w;
  w["architectures"] = {"KimiK25ForConditionalGeneration"};
  w["model_type"] = "kimi_k25";
  w["text_config"] = j;
  w["vision_config"] = {{"model_type", "moonvit"}, {"hidden_size", 16}, {"patch_size", 2}};
  w["torch_dtype"] = TorchDtype(dtype);
  w["tie_word_embeddings"] = c.tie_embeddings;
  return w.dump(2) + "\n";
}

}  // namespace

StatusOr<std::string> HfConfigJson(const ModelConfig& c, DType dtype) {
  if (c.IsMla()) return DeepseekConfigJson(c, dtype);
  const char* arch = HfArchitecture(c.arch);
  if (arch == nullptr) {
    return UnsupportedError(fmt::format("cannot write a config.json for architecture '{}'", c.arch));
  }
  nlohmann::ordered_json j;
  j["architectures"] = {arch};
  j["model_type"] = c.arch;
  j["hidden_size"] = c.hidden_dim;
  j["intermediate_size"] = c.ffn_dim;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["num_hidden_layers"] = c.n_layers;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.type == "llama3") {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
  } else if (c.rope_scaling.type == "linear") {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = c.tie_embeddings;
  if (c.bos_id >= 0) j["bos_token_id"] = c.bos_id;
  if (c.eos_ids.size() == 1) {
    j["eos_token_id"] = c.eos_ids[0];
  } else if (!c.eos_ids.empty()) {
    j["eos_token_id"] = c.eos_ids;
  }
  j["torch_dtype"] = TorchDtype(dtype);
  return j.dump(2) + "\n";
}

DType StoredDType(const std::string& name, DType dtype) {
  static const std::string kBias = ".e_score_correction_bias";
  const bool bias = name.size() >= kBias.size() &&
                    name.compare(name.size() - kBias.size(), kBias.size(), kBias) == 0;
  return bias ? DType::kF32 : dtype;
}

Status WriteSafetensorsModel(const ModelConfig& c, const std::vector<WeightSource>& weights,
                             DType dtype, const std::string& dir) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return InvalidArgumentError(fmt::format("safetensors cannot hold {} weights (supported: f32, "
                                            "f16, bf16; use --format gguf for q8_0/q4_0)",
                                            DTypeName(dtype)));
  }
  ASSIGN_OR_RETURN(std::string config_text, HfConfigJson(c, dtype));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(fmt::format("{}: cannot create folder: {}", dir, ec.message()));
  SafetensorsWriter w;
  w.SetMetadata("format", "pt");
  for (const WeightSource& ws : weights) {
    if (c.tie_embeddings && ws.name == "lm_head.weight") continue;
    RETURN_IF_ERROR(w.AddTensor(ws.name, StoredDType(ws.name, dtype), ws.shape, ws.rows));
  }
  RETURN_IF_ERROR(w.Write(dir + "/model.safetensors"));
  return WriteStringToFile(dir + "/config.json", config_text);
}

Status WriteGgufModel(const ModelConfig& c, const std::vector<WeightSource>& weights,
                      const GgufModelOptions& options, const std::string& path) {
  if (c.IsMla()) return WriteDeepseek2Gguf(c, weights, options, path);
  std::string arch;
  if (c.arch == "llama" || c.arch == "mistral") {
    arch = "llama";
  } else if (c.arch == "qwen2" || c.arch == "qwen3") {
    arch = c.arch;
  } else {
    return UnsupportedError(fmt::format("cannot write GGUF for architecture '{}' (supported: "
                                        "llama, mistral, qwen2, qwen3)",
                                        c.arch));
  }
  const DType dtype = options.dtype;
  GgufWriter w;
  const std::string p = arch + ".";
  w.SetString("general.architecture", arch);
  w.SetString("general.name", options.name);
  w.SetU32("general.file_type", GgufFileType(dtype));
  w.SetU32(p + "context_length", static_cast<uint32_t>(c.max_seq_len));
  w.SetU32(p + "embedding_length", static_cast<uint32_t>(c.hidden_dim));
  w.SetU32(p + "block_count", static_cast<uint32_t>(c.n_layers));
  w.SetU32(p + "feed_forward_length", static_cast<uint32_t>(c.ffn_dim));
  w.SetU32(p + "attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.SetU32(p + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.SetU32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.SetU32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.SetU32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  w.SetF32(p + "attention.layer_norm_rms_epsilon", c.norm_eps);
  w.SetF32(p + "rope.freq_base", c.rope_theta);
  w.SetU32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  if (c.rope_scaling.type == "linear") {
    w.SetString(p + "rope.scaling.type", "linear");
    w.SetF32(p + "rope.scaling.factor", c.rope_scaling.factor);
  } else if (c.rope_scaling.type == "llama3") {
    // llama.cpp has no metadata for llama3 scaling; it multiplies the
    // per-pair wavelengths by rope_freqs.weight. The original context length
    // is written too so readers can recover every parameter.
    w.SetU32(p + "rope.scaling.original_context_length",
             static_cast<uint32_t>(c.rope_scaling.original_max_position));
    auto factors = std::make_shared<std::vector<float>>(
        Llama3RopeFreqFactors(c.head_dim, c.rope_theta, c.rope_scaling));
    RETURN_IF_ERROR(w.AddTensor("rope_freqs.weight", DType::kF32,
                                {static_cast<int64_t>(factors->size())},
                                [factors](int64_t, float* dst) {
                                  std::copy(factors->begin(), factors->end(), dst);
                                }));
  }
  if (options.vocab != nullptr && !options.vocab->tokens.empty()) {
    const GgufVocab& v = *options.vocab;
    w.SetString("tokenizer.ggml.model", v.model);
    if (!v.pre.empty()) w.SetString("tokenizer.ggml.pre", v.pre);
    w.SetStringArray("tokenizer.ggml.tokens", v.tokens);
    if (!v.scores.empty()) w.SetF32Array("tokenizer.ggml.scores", v.scores);
    if (!v.token_types.empty()) w.SetI32Array("tokenizer.ggml.token_type", v.token_types);
    if (!v.merges.empty()) w.SetStringArray("tokenizer.ggml.merges", v.merges);
    if (v.unk_id >= 0) w.SetU32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
    if (v.pad_id >= 0) w.SetU32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
    w.SetBool("tokenizer.ggml.add_bos_token", v.add_bos);
    w.SetBool("tokenizer.ggml.add_eos_token", v.add_eos);
    w.SetBool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  } else {
    w.SetString("tokenizer.ggml.model", "no_vocab");
  }
  // Special ids come from the model config (the vocab's own are the same for
  // a checkpoint that came from GGUF).
  if (c.bos_id >= 0) w.SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(c.bos_id));
  if (!c.eos_ids.empty()) w.SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_ids[0]));
  if (c.eos_ids.size() > 1) w.SetU32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(c.eos_ids[1]));
  if (c.eos_ids.size() > 2) w.SetU32("tokenizer.ggml.eom_token_id", static_cast<uint32_t>(c.eos_ids[2]));

  const bool permute = arch == "llama";
  std::vector<std::string> fallbacks;  // quantized rows must be whole blocks
  std::string first_fallback;
  for (const WeightSource& ws : weights) {
    if (c.tie_embeddings && ws.name == "lm_head.weight") continue;
    DType dt = ws.shape.size() >= 2 ? dtype : DType::kF32;
    if (auto it = options.tensor_dtypes.find(ws.name); it != options.tensor_dtypes.end()) {
      dt = it->second;
    }
    const int64_t cols = ws.shape.back();
    if (cols % DTypeBlockElems(dt) != 0) {
      if (fallbacks.empty()) {
        first_fallback = fmt::format("{} ({} columns, {} blocks of {})", ws.name, cols,
                                     DTypeName(dt), DTypeBlockElems(dt));
      }
      fallbacks.push_back(ws.name);
      dt = DType::kF16;
    }
    int n_head = 0;
    RowFn rows = ws.rows;
    if (permute && IsPermutedForGguf(ws.name, c, &n_head)) {
      const int64_t n_rows = ws.shape[0];
      if (n_rows % n_head != 0 || (n_rows / n_head) % 2 != 0) {
        return InvalidArgumentError(fmt::format("{}: {} rows cannot be split into {} heads of even "
                                                "size",
                                                ws.name, n_rows, n_head));
      }
      // 1-D biases are a single row: permute their elements instead.
      if (ws.shape.size() == 1) {
        RowFn src = ws.rows;
        rows = [src, n_rows, n_head](int64_t, float* dst) {
          std::vector<float> hf(static_cast<size_t>(n_rows));
          src(0, hf.data());
          for (int64_t g = 0; g < n_rows; ++g) dst[g] = hf[GgufRowToHfRow(g, n_rows, n_head)];
        };
      } else {
        RowFn src = ws.rows;
        rows = [src, n_rows, n_head](int64_t g, float* dst) {
          src(GgufRowToHfRow(g, n_rows, n_head), dst);
        };
      }
    }
    RETURN_IF_ERROR(w.AddTensor(HfToGgufName(ws.name), dt, ws.shape, std::move(rows)));
  }
  if (!fallbacks.empty()) {
    LOG_INFO("write gguf", "{} matrices written as f16: rows not a whole number of blocks "
             "(first: {})", fallbacks.size(), first_fallback);
  }
  return w.Write(path);
}

}  // namespace specd
