#include "loader/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <nlohmann/json.hpp>

#include "loader/json_fields.h"

namespace specd {
namespace {

using json = nlohmann::json;

constexpr const char* kSupportedArchs =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
    "LlamaForCausalLMEagle3, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, "
    "KimiK25ForConditionalGeneration";

Status ParseRopeScaling(const Fields& cfg, const std::string& source, ModelConfig* c) {
  // transformers >= 5 nests rope settings in "rope_parameters"; older configs
  // use "rope_theta" + "rope_scaling".
  const char* key = cfg.Has("rope_scaling") ? "rope_scaling"
                    : cfg.Has("rope_parameters") ? "rope_parameters" : nullptr;
  if (key == nullptr) return Status::Ok();
  if (!cfg.At(key).is_object()) return cfg.WrongType(key, "object");
  Fields rs(cfg.At(key), source, cfg.Name(key) + ".");
  if (rs.Has("rope_theta")) {
    ASSIGN_OR_RETURN(double theta, rs.Number("rope_theta", 10000.0));
    c->rope_theta = static_cast<float>(theta);
  }
  ASSIGN_OR_RETURN(std::string type, rs.String("rope_type", ""));
  if (type.empty()) {
    ASSIGN_OR_RETURN(type, rs.String("type", ""));
  }
  if (type.empty() || type == "default") return Status::Ok();
  const bool mla = c->arch == "deepseek_v2" || c->arch == "deepseek_v3";
  if (type != "llama3" && type != "linear" && !(type == "yarn" && mla)) {
    return UnsupportedError(fmt::format(
        "{}: key '{}.rope_type': RoPE scaling '{}' is not supported for {} (supported: llama3, "
        "linear{})",
        source, cfg.Name(key), type, c->arch, mla ? ", yarn" : "; yarn for DeepSeek-V2/V3 only"));
  }
  RopeScaling& s = c->rope_scaling;
  s.type = type;
  ASSIGN_OR_RETURN(double factor, rs.Number("factor", 1.0));
  s.factor = static_cast<float>(factor);
  if (type == "llama3") {
    ASSIGN_OR_RETURN(double low, rs.Number("low_freq_factor", 1.0));
    ASSIGN_OR_RETURN(double high, rs.Number("high_freq_factor", 4.0));
    ASSIGN_OR_RETURN(int64_t orig, rs.Int("original_max_position_embeddings", 8192));
    s.low_freq_factor = static_cast<float>(low);
    s.high_freq_factor = static_cast<float>(high);
    RETURN_IF_ERROR(ToInt(source, key + std::string(".original_max_position_embeddings"), orig,
                          &s.original_max_position));
  }
  if (type == "yarn") {
    // Absent keys keep transformers' defaults (beta_fast 32, beta_slow 1).
    ASSIGN_OR_RETURN(int64_t orig, rs.Int("original_max_position_embeddings"));
    RETURN_IF_ERROR(ToInt(source, rs.Name("original_max_position_embeddings"), orig,
                          &s.original_max_position));
    ASSIGN_OR_RETURN(double beta_fast, rs.Number("beta_fast", 32.0));
    ASSIGN_OR_RETURN(double beta_slow, rs.Number("beta_slow", 1.0));
    ASSIGN_OR_RETURN(double mscale, rs.Number("mscale", 0.0));
    ASSIGN_OR_RETURN(double mscale_all_dim, rs.Number("mscale_all_dim", 0.0));
    ASSIGN_OR_RETURN(s.truncate, rs.Bool("truncate", true));
    if (rs.Has("attention_factor")) {
      return UnsupportedError(fmt::format("{}: key '{}': an explicit YaRN attention_factor is not "
                                          "supported (it is derived from mscale/mscale_all_dim)",
                                          source, rs.Name("attention_factor")));
    }
    // transformers treats 0 as "absent" for beta_fast/beta_slow.
    s.beta_fast = beta_fast == 0 ? 32.f : static_cast<float>(beta_fast);
    s.beta_slow = beta_slow == 0 ? 1.f : static_cast<float>(beta_slow);
    s.mscale = static_cast<float>(mscale);
    s.mscale_all_dim = static_cast<float>(mscale_all_dim);
  }
  return Status::Ok();
}

// architectures[0], else model_type mapped to its class; "" when neither.
StatusOr<std::string> ArchitectureName(const Fields& cfg, const std::string& source) {
  if (cfg.Has("architectures")) {
    const json& a = cfg.At("architectures");
    if (!a.is_array()) return cfg.WrongType("architectures", "list of strings");
    if (!a.empty()) {
      if (!a[0].is_string()) {
        return InvalidArgumentError(fmt::format(
            "{}: key '{}': expected a list of strings, found an element of type {}", source,
            cfg.Name("architectures"), JsonTypeName(a[0])));
      }
      return a[0].get<std::string>();
    }
  }
  ASSIGN_OR_RETURN(std::string model_type, cfg.String("model_type", ""));
  static const std::pair<const char*, const char*> kTypes[] = {
      {"llama", "LlamaForCausalLM"},         {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},         {"qwen3", "Qwen3ForCausalLM"},
      {"deepseek_v2", "DeepseekV2ForCausalLM"}, {"deepseek_v3", "DeepseekV3ForCausalLM"},
      {"kimi_k2", "DeepseekV3ForCausalLM"},  {"kimi_k25", "KimiK25ForConditionalGeneration"}};
  for (const auto& [t, a] : kTypes) {
    if (model_type == t) return std::string(a);
  }
  return model_type;
}

}  // namespace

std::vector<float> Llama3RopeFreqFactors(int head_dim, float rope_theta, const RopeScaling& s) {
  // Wavelengths above original_max_position / low_freq_factor are stretched
  // by `factor`, those below original_max_position / high_freq_factor kept,
  // and the band between interpolated smoothly (Llama 3.1 reference code).
  const double low_wavelen = s.original_max_position / s.low_freq_factor;
  const double high_wavelen = s.original_max_position / s.high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    double freq = 1.0 / std::pow(static_cast<double>(rope_theta), static_cast<double>(i) / head_dim);
    double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.f);
    } else if (wavelen > low_wavelen) {
      out.push_back(s.factor);
    } else {
      double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                      (s.high_freq_factor - s.low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return out;
}

namespace {
Status ParseDeepseekFields(const Fields& cfg, const std::string& source, ModelConfig* c);
}  // namespace

StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return CorruptionError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (!root.is_object()) {
    return CorruptionError(fmt::format("{}: expected a JSON object at the top level, found {}",
                                       source, JsonTypeName(root)));
  }
  ModelConfig c;
  // Kimi-K2.5 wraps a DeepSeek-V3 text model (text_config) with a vision
  // tower; its language-model tensors are prefixed "language_model.".
  const json* obj = &root;
  std::string key_prefix;
  std::string arch_name;
  {
    Fields top(root, source);
    ASSIGN_OR_RETURN(arch_name, ArchitectureName(top, source));
    if (arch_name == "KimiK25ForConditionalGeneration") {
      if (!top.Has("text_config")) return top.Missing("text_config");
      if (!root["text_config"].is_object()) return top.WrongType("text_config", "object");
      obj = &root["text_config"];
      key_prefix = "text_config.";
      // The language model's keys live in text_config; a top-level copy that
      // disagrees makes the file ambiguous.
      for (const auto& [key, inner] : obj->items()) {
        static const std::set<std::string> kNotModelShape = {
            "architectures", "model_type",   "torch_dtype", "dtype",   "transformers_version",
            "_name_or_path", "auto_map",     "use_cache",   "return_dict"};
        if (kNotModelShape.count(key) || !root.contains(key)) continue;
        if (root[key] != inner) {
          return InvalidArgumentError(fmt::format(
              "{}: key '{}' = {} contradicts 'text_config.{}' = {} (the language model reads "
              "text_config; remove or correct the top-level key)",
              source, key, root[key].dump(), key, inner.dump()));
        }
      }
      c.tensor_prefix = "language_model.";
      Fields inner(*obj, source, key_prefix);
      ASSIGN_OR_RETURN(arch_name, ArchitectureName(inner, source));
      if (arch_name.empty()) arch_name = "DeepseekV3ForCausalLM";
    }
  }
  Fields cfg(*obj, source, key_prefix);
  if (arch_name.empty()) {
    return NotFoundError(fmt::format(
        "{}: missing required key 'architectures' (or 'model_type'); supported: {}", source,
        kSupportedArchs));
  }
  if (arch_name == "LlamaForCausalLM") {
    c.arch = "llama";
  } else if (arch_name == "MistralForCausalLM") {
    c.arch = "mistral";
  } else if (arch_name == "Qwen2ForCausalLM") {
    c.arch = "qwen2";
    c.qkv_bias = true;
  } else if (arch_name == "Qwen3ForCausalLM") {
    c.arch = "qwen3";
    c.qk_norm = true;
  } else if (arch_name == "LlamaForCausalLMEagle3") {
    c.arch = "llama_eagle3";
  } else if (arch_name == "DeepseekV3ForCausalLM") {
    c.arch = "deepseek_v3";
  } else if (arch_name == "DeepseekV2ForCausalLM") {
    c.arch = "deepseek_v2";
  } else {
    return UnsupportedError(fmt::format("{}: architecture '{}' is not supported (supported: {})",
                                        source, arch_name, kSupportedArchs));
  }
  c.rope_style = RopeStyle::kHalf;

  int64_t v = 0;
  ASSIGN_OR_RETURN(v, cfg.Int("num_hidden_layers"));
  RETURN_IF_ERROR(ToInt(source, "num_hidden_layers", v, &c.n_layers));
  ASSIGN_OR_RETURN(v, cfg.Int("hidden_size"));
  RETURN_IF_ERROR(ToInt(source, "hidden_size", v, &c.hidden_dim));
  ASSIGN_OR_RETURN(v, cfg.Int("intermediate_size"));
  RETURN_IF_ERROR(ToInt(source, "intermediate_size", v, &c.ffn_dim));
  ASSIGN_OR_RETURN(v, cfg.Int("num_attention_heads"));
  RETURN_IF_ERROR(ToInt(source, "num_attention_heads", v, &c.n_heads));
  ASSIGN_OR_RETURN(v, cfg.Int("num_key_value_heads", c.n_heads));
  RETURN_IF_ERROR(ToInt(source, "num_key_value_heads", v, &c.n_kv_heads));
  ASSIGN_OR_RETURN(v, cfg.Int("vocab_size"));
  RETURN_IF_ERROR(ToInt(source, "vocab_size", v, &c.vocab_size));
  const bool mla = c.arch == "deepseek_v2" || c.arch == "deepseek_v3";
  if (mla) {
    RETURN_IF_ERROR(ParseDeepseekFields(cfg, source, &c));
  } else if (cfg.Has("head_dim")) {
    ASSIGN_OR_RETURN(v, cfg.Int("head_dim"));
    RETURN_IF_ERROR(ToInt(source, "head_dim", v, &c.head_dim));
  } else {
    if (c.n_heads <= 0 || c.hidden_dim % c.n_heads != 0) {
      return InvalidArgumentError(fmt::format(
          "{}: key 'hidden_size' = {}: expected a multiple of num_attention_heads ({}) when "
          "'head_dim' is absent",
          source, c.hidden_dim, c.n_heads));
    }
    c.head_dim = c.hidden_dim / c.n_heads;
  }
  // HF defaults per architecture when the key is absent.
  int64_t default_max_pos = 2048;
  if (c.arch == "mistral") default_max_pos = 32768;
  if (c.arch == "qwen2" || c.arch == "qwen3") default_max_pos = 32768;
  ASSIGN_OR_RETURN(v, cfg.Int("max_position_embeddings", default_max_pos));
  RETURN_IF_ERROR(ToInt(source, "max_position_embeddings", v, &c.max_seq_len));
  ASSIGN_OR_RETURN(double eps, cfg.Number("rms_norm_eps", 1e-6));
  c.norm_eps = static_cast<float>(eps);
  ASSIGN_OR_RETURN(double theta, cfg.Number("rope_theta", 10000.0));
  c.rope_theta = static_cast<float>(theta);
  RETURN_IF_ERROR(ParseRopeScaling(cfg, source, &c));
  ASSIGN_OR_RETURN(c.tie_embeddings, cfg.Bool("tie_word_embeddings", false));

  ASSIGN_OR_RETURN(std::string act, cfg.String("hidden_act", "silu"));
  if (act != "silu") {
    return UnsupportedError(fmt::format("{}: key 'hidden_act': activation '{}' is not supported "
                                        "(supported: silu)",
                                        source, act));
  }
  if (c.arch != "qwen2") {
    // HF Llama/Mistral/Qwen3 attention_bias adds a bias to o_proj too, which
    // the forward pass does not implement.
    ASSIGN_OR_RETURN(bool attn_bias, cfg.Bool("attention_bias", false));
    if (attn_bias) {
      return UnsupportedError(fmt::format(
          "{}: key 'attention_bias' = true is not supported for {} (q/k/v/o biases)", source,
          arch_name));
    }
  }
  ASSIGN_OR_RETURN(bool mlp_bias, cfg.Bool("mlp_bias", false));
  if (mlp_bias) {
    return UnsupportedError(fmt::format("{}: key 'mlp_bias' = true is not supported", source));
  }

  ASSIGN_OR_RETURN(v, cfg.Int("bos_token_id", -1));
  RETURN_IF_ERROR(ToInt(source, "bos_token_id", v, &c.bos_id));
  ASSIGN_OR_RETURN(std::vector<int64_t> eos, cfg.IntOrList("eos_token_id"));
  for (int64_t e : eos) {
    int id = 0;
    RETURN_IF_ERROR(ToInt(source, "eos_token_id", e, &id));
    c.eos_ids.push_back(id);
  }

  if (c.arch == "llama_eagle3") {
    ASSIGN_OR_RETURN(v, cfg.Int("draft_vocab_size", 0));
    RETURN_IF_ERROR(ToInt(source, "draft_vocab_size", v, &c.draft_vocab_size));
    ASSIGN_OR_RETURN(v, cfg.Int("target_hidden_size", 0));
    RETURN_IF_ERROR(ToInt(source, "target_hidden_size", v, &c.target_hidden_size));
    if (cfg.Has("eagle_config")) {
      if (!root["eagle_config"].is_object()) return cfg.WrongType("eagle_config", "object");
      Fields ec(root["eagle_config"], source, "eagle_config.");
      ASSIGN_OR_RETURN(std::vector<int64_t> ids, ec.IntOrList("eagle_aux_hidden_state_layer_ids"));
      for (int64_t id : ids) {
        int x = 0;
        RETURN_IF_ERROR(ToInt(source, "eagle_config.eagle_aux_hidden_state_layer_ids", id, &x));
        c.eagle_aux_layer_ids.push_back(x);
      }
    }
  }
  RETURN_IF_ERROR(c.Validate(source));
  return c;
}

namespace {

Status ParseDeepseekFields(const Fields& cfg, const std::string& source, ModelConfig* c) {
  auto get = [&](const char* key, int64_t def, int* out) -> Status {
    ASSIGN_OR_RETURN(int64_t v, def < 0 ? cfg.Int(key) : cfg.Int(key, def));
    return ToInt(source, cfg.Name(key), v, out);
  };
  MlaConfig& m = c->mla;
  RETURN_IF_ERROR(get("q_lora_rank", 0, &m.q_lora_rank));  // null: plain q_proj
  RETURN_IF_ERROR(get("kv_lora_rank", -1, &m.kv_lora_rank));
  RETURN_IF_ERROR(get("qk_nope_head_dim", -1, &m.qk_nope_head_dim));
  RETURN_IF_ERROR(get("qk_rope_head_dim", -1, &m.qk_rope_head_dim));
  RETURN_IF_ERROR(get("v_head_dim", -1, &m.v_head_dim));
  c->head_dim = m.qk_rope_head_dim;
  c->n_kv_heads = c->n_heads;
  // transformers' DeepseekV3 always rotates interleaved pairs unless
  // rope_interleave is false; DeepseekV2 always does (complex multiply).
  ASSIGN_OR_RETURN(bool interleave, cfg.Bool("rope_interleave", true));
  if (c->arch == "deepseek_v2") interleave = true;
  c->rope_style = interleave ? RopeStyle::kInterleaved : RopeStyle::kHalf;

  RETURN_IF_ERROR(get("num_nextn_predict_layers", 0, &c->n_mtp_layers));
  MoeConfig& e = c->moe;
  RETURN_IF_ERROR(get("n_routed_experts", 0, &e.n_routed_experts));
  if (e.n_routed_experts == 0) return Status::Ok();
  RETURN_IF_ERROR(get("n_shared_experts", 0, &e.n_shared_experts));
  RETURN_IF_ERROR(get("num_experts_per_tok", -1, &e.top_k));
  RETURN_IF_ERROR(get("moe_intermediate_size", -1, &e.expert_ffn_dim));
  RETURN_IF_ERROR(get("first_k_dense_replace", 0, &e.first_k_dense));
  RETURN_IF_ERROR(get("moe_layer_freq", 1, &e.layer_freq));
  RETURN_IF_ERROR(get("n_group", 1, &e.n_group));
  RETURN_IF_ERROR(get("topk_group", 1, &e.topk_group));
  ASSIGN_OR_RETURN(double scale, cfg.Number("routed_scaling_factor", 1.0));
  e.routed_scaling_factor = static_cast<float>(scale);
  if (c->arch == "deepseek_v3") {
    // transformers' DeepseekV3 routes one way only: sigmoid scores, the
    // correction bias for choice, group-limited top-k.
    ASSIGN_OR_RETURN(e.scoring, cfg.String("scoring_func", "sigmoid"));
    ASSIGN_OR_RETURN(e.topk_method, cfg.String("topk_method", "noaux_tc"));
    ASSIGN_OR_RETURN(e.norm_topk_prob, cfg.Bool("norm_topk_prob", true));
    if (e.scoring != "sigmoid" || e.topk_method != "noaux_tc") {
      return UnsupportedError(fmt::format(
          "{}: routing scoring_func '{}' with topk_method '{}' is not supported for "
          "DeepseekV3ForCausalLM (supported: sigmoid with noaux_tc)",
          source, e.scoring, e.topk_method));
    }
  } else {
    // DeepseekV2: softmax scores, greedy or group-limited greedy, and (as in
    // transformers) no renormalisation of the chosen weights.
    ASSIGN_OR_RETURN(e.scoring, cfg.String("scoring_func", "softmax"));
    ASSIGN_OR_RETURN(e.topk_method, cfg.String("topk_method", "greedy"));
    e.norm_topk_prob = false;
    if (e.scoring != "softmax" ||
        (e.topk_method != "greedy" && e.topk_method != "group_limited_greedy")) {
      return UnsupportedError(fmt::format(
          "{}: routing scoring_func '{}' with topk_method '{}' is not supported for "
          "DeepseekV2ForCausalLM (supported: softmax with greedy or group_limited_greedy)",
          source, e.scoring, e.topk_method));
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Names a ModelConfig field the way the source file spells it: HF keys for
// config.json, "{arch}.…" keys for GGUF.
struct KeyNames {
  bool gguf;
  std::string arch;
  std::string operator()(const char* hf, const char* gguf_suffix) const {
    if (!gguf || gguf_suffix == nullptr) return hf;
    return arch + "." + gguf_suffix;
  }
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Status ModelConfig::Validate(const std::string& source) const {
  KeyNames key{EndsWith(source, ".gguf"),
               arch == "mistral" ? std::string("llama") : (IsMla() ? std::string("deepseek2") : arch)};
  auto bad = [&](const std::string& name, auto value, const std::string& expected) {
    return InvalidArgumentError(
        fmt::format("{}: {} = {}: expected {}", source, name, value, expected));
  };
  auto range = [&](const char* hf, const char* gg, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi) {
      return bad(key(hf, gg), value, fmt::format("a value in [{}, {}]", lo, hi));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(range("num_hidden_layers", "block_count", n_layers, 1, 1024));
  // MLA's head_dim is qk_rope_head_dim: check the MLA fields under their own names first.
  if (arch == "deepseek_v2" || arch == "deepseek_v3") RETURN_IF_ERROR(ValidateMlaMoe(source));
  RETURN_IF_ERROR(range("hidden_size", "embedding_length", hidden_dim, 1, 1 << 17));
  RETURN_IF_ERROR(range("intermediate_size", "feed_forward_length", ffn_dim, 1, 1 << 20));
  RETURN_IF_ERROR(range("num_attention_heads", "attention.head_count", n_heads, 1, 1024));
  RETURN_IF_ERROR(range("num_key_value_heads", "attention.head_count_kv", n_kv_heads, 1, n_heads));
  if (n_heads % n_kv_heads != 0) {
    return bad(key("num_key_value_heads", "attention.head_count_kv"), n_kv_heads,
               fmt::format("a divisor of the number of attention heads ({})", n_heads));
  }
  RETURN_IF_ERROR(range("head_dim", "attention.key_length", head_dim, 2, 1024));
  if (head_dim % 2 != 0) {
    return bad(key("head_dim", "attention.key_length"), head_dim, "an even number (RoPE pairs)");
  }
  RETURN_IF_ERROR(range("vocab_size", "vocab_size", vocab_size, 1, 1 << 24));
  RETURN_IF_ERROR(range("max_position_embeddings", "context_length", max_seq_len, 1, 1 << 24));
  if (!(norm_eps > 0.f && norm_eps < 1.f)) {
    return bad(key("rms_norm_eps", "attention.layer_norm_rms_epsilon"), norm_eps,
               "a value in (0, 1)");
  }
  if (!(rope_theta > 0.f) || !std::isfinite(rope_theta)) {
    return bad(key("rope_theta", "rope.freq_base"), rope_theta, "a positive finite number");
  }
  if (!rope_scaling.type.empty()) {
    if (rope_scaling.type != "llama3" && rope_scaling.type != "linear" &&
        !(rope_scaling.type == "yarn" && IsMla())) {
      return bad(key("rope_scaling.rope_type", "rope.scaling.type"), rope_scaling.type,
                 IsMla() ? "'llama3', 'linear' or 'yarn'" : "'llama3' or 'linear'");
    }
    if (rope_scaling.type == "yarn") {
      RETURN_IF_ERROR(range("rope_scaling.original_max_position_embeddings",
                            "rope.scaling.original_context_length",
                            rope_scaling.original_max_position, 1, 1 << 24));
      if (!(rope_scaling.beta_fast > 0.f) || !(rope_scaling.beta_slow > 0.f)) {
        return bad(key("rope_scaling.beta_fast", nullptr), rope_scaling.beta_fast,
                   "positive beta_fast and beta_slow");
      }
      if (rope_scaling.mscale < 0.f || rope_scaling.mscale_all_dim < 0.f) {
        return bad(key("rope_scaling.mscale_all_dim", nullptr), rope_scaling.mscale_all_dim,
                   "non-negative mscale and mscale_all_dim");
      }
    }
    if (!(rope_scaling.factor > 0.f) || !std::isfinite(rope_scaling.factor)) {
      return bad(key("rope_scaling.factor", "rope.scaling.factor"), rope_scaling.factor,
                 "a positive finite number");
    }
    if (rope_scaling.type == "llama3") {
      if (!(rope_scaling.low_freq_factor > 0.f)) {
        return bad(key("rope_scaling.low_freq_factor", nullptr), rope_scaling.low_freq_factor,
                   "a positive number");
      }
      if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor)) {
        return bad(key("rope_scaling.high_freq_factor", nullptr), rope_scaling.high_freq_factor,
                   fmt::format("a value above low_freq_factor ({})", rope_scaling.low_freq_factor));
      }
      RETURN_IF_ERROR(range("rope_scaling.original_max_position_embeddings", nullptr,
                            rope_scaling.original_max_position, 1, 1 << 24));
    }
  }
  if (bos_id < -1 || bos_id >= vocab_size) {
    return bad(key("bos_token_id", nullptr), bos_id,
               fmt::format("-1 (none) or an id below vocab_size ({})", vocab_size));
  }
  for (int e : eos_ids) {
    if (e < 0 || e >= vocab_size) {
      return bad(key("eos_token_id", nullptr), e,
                 fmt::format("an id below vocab_size ({})", vocab_size));
    }
  }
  if (arch == "llama_eagle3") {
    RETURN_IF_ERROR(range("draft_vocab_size", nullptr, draft_vocab_size, 0, vocab_size));
    RETURN_IF_ERROR(range("target_hidden_size", nullptr, target_hidden_size, 0, 1 << 17));
    for (int id : eagle_aux_layer_ids) {
      RETURN_IF_ERROR(range("eagle_config.eagle_aux_hidden_state_layer_ids", nullptr, id, 0, 1023));
    }
  }
  return Status::Ok();
}

Status ModelConfig::ValidateMlaMoe(const std::string& source) const {
  const bool gguf = EndsWith(source, ".gguf");
  auto name = [&](const char* hf, const char* gg) {
    return gguf && gg ? fmt::format("{}.{}", "deepseek2", gg) : std::string(hf);
  };
  auto range = [&](const char* hf, const char* gg, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi) {
      return InvalidArgumentError(fmt::format("{}: {} = {}: expected a value in [{}, {}]", source,
                                              name(hf, gg), value, lo, hi));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(range("q_lora_rank", "attention.q_lora_rank", mla.q_lora_rank, 0, 1 << 16));
  RETURN_IF_ERROR(range("kv_lora_rank", "attention.kv_lora_rank", mla.kv_lora_rank, 1, 1 << 16));
  RETURN_IF_ERROR(range("qk_nope_head_dim", nullptr, mla.qk_nope_head_dim, 1, 1024));
  RETURN_IF_ERROR(range("qk_rope_head_dim", "rope.dimension_count", mla.qk_rope_head_dim, 2, 1024));
  if (mla.qk_rope_head_dim % 2 != 0) {
    return InvalidArgumentError(fmt::format("{}: {} = {}: expected an even number (RoPE pairs)",
                                            source, name("qk_rope_head_dim", "rope.dimension_count"),
                                            mla.qk_rope_head_dim));
  }
  RETURN_IF_ERROR(range("v_head_dim", "attention.value_length", mla.v_head_dim, 1, 1024));
  if (moe.n_routed_experts == 0) return Status::Ok();
  RETURN_IF_ERROR(range("n_routed_experts", "expert_count", moe.n_routed_experts, 1, 4096));
  RETURN_IF_ERROR(range("num_experts_per_tok", "expert_used_count", moe.top_k, 1,
                        moe.n_routed_experts));
  RETURN_IF_ERROR(range("n_shared_experts", "expert_shared_count", moe.n_shared_experts, 0, 64));
  RETURN_IF_ERROR(range("moe_intermediate_size", "expert_feed_forward_length", moe.expert_ffn_dim,
                        1, 1 << 20));
  RETURN_IF_ERROR(range("first_k_dense_replace", "leading_dense_block_count", moe.first_k_dense, 0,
                        n_layers));
  RETURN_IF_ERROR(range("moe_layer_freq", nullptr, moe.layer_freq, 1, n_layers));
  RETURN_IF_ERROR(range("n_group", "expert_group_count", moe.n_group, 1, moe.n_routed_experts));
  if (moe.n_routed_experts % moe.n_group != 0) {
    return InvalidArgumentError(fmt::format(
        "{}: {} = {}: expected a divisor of n_routed_experts ({})", source,
        name("n_group", "expert_group_count"), moe.n_group, moe.n_routed_experts));
  }
  RETURN_IF_ERROR(range("topk_group", "expert_group_used_count", moe.topk_group, 1, moe.n_group));
  const int per_group = moe.n_routed_experts / moe.n_group;
  if (moe.topk_method == "noaux_tc" && moe.n_group > 1 && per_group < 2) {
    return InvalidArgumentError(fmt::format(
        "{}: n_group = {}: noaux_tc group scores sum each group's top 2 experts, so a group needs "
        "at least 2 of the {} experts",
        source, moe.n_group, moe.n_routed_experts));
  }
  if (moe.topk_method != "greedy" && moe.top_k > moe.topk_group * per_group) {
    return InvalidArgumentError(fmt::format(
        "{}: num_experts_per_tok = {}: expected at most topk_group · experts per group ({})", source,
        moe.top_k, moe.topk_group * per_group));
  }
  if (!(moe.routed_scaling_factor > 0.f) || !std::isfinite(moe.routed_scaling_factor)) {
    return InvalidArgumentError(fmt::format("{}: {} = {}: expected a positive finite number",
                                            source,
                                            name("routed_scaling_factor", "expert_weights_scale"),
                                            moe.routed_scaling_factor));
  }
  if (moe.scoring != "softmax" && moe.scoring != "sigmoid") {
    return InvalidArgumentError(fmt::format("{}: scoring_func = '{}': expected softmax or sigmoid",
                                            source, moe.scoring));
  }
  if (moe.topk_method != "greedy" && moe.topk_method != "group_limited_greedy" &&
      moe.topk_method != "noaux_tc") {
    return InvalidArgumentError(fmt::format(
        "{}: topk_method = '{}': expected greedy, group_limited_greedy or noaux_tc", source,
        moe.topk_method));
  }
  return Status::Ok();
}

}  // namespace specd
