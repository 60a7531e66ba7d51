#include "loader/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace specd {
namespace {

using json = nlohmann::json;

constexpr const char* kSupportedArchs =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
    "LlamaForCausalLMEagle3";

const char* JsonTypeName(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();  // "null", "string", "array", "object", "boolean"
}

// Typed access to one JSON object, with errors naming the file, the key (with
// its parent path), the expected and the found type.
class Fields {
 public:
  Fields(const json& obj, std::string source, std::string prefix = "")
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Absent and null both count as "not set" (HF writes "head_dim": null).
  bool Has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const json& At(const char* key) const { return obj_[key]; }
  std::string Name(const char* key) const { return prefix_ + key; }

  Status Missing(const char* key) const {
    return NotFoundError(fmt::format("{}: missing required key '{}'", source_, Name(key)));
  }
  Status WrongType(const char* key, const char* expected) const {
    return InvalidArgumentError(fmt::format("{}: key '{}': expected {}, found {}", source_,
                                            Name(key), expected, JsonTypeName(obj_[key])));
  }

  StatusOr<int64_t> Int(const char* key) const {
    if (!Has(key)) return Missing(key);
    const json& v = obj_[key];
    if (v.is_number_integer()) return v.get<int64_t>();
    // 2048.0 is accepted; 2048.5 is not.
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) < 9e15) {
      return static_cast<int64_t>(v.get<double>());
    }
    return WrongType(key, "integer");
  }
  StatusOr<int64_t> Int(const char* key, int64_t def) const {
    if (!Has(key)) return def;
    return Int(key);
  }
  StatusOr<double> Number(const char* key, double def) const {
    if (!Has(key)) return def;
    const json& v = obj_[key];
    if (!v.is_number()) return WrongType(key, "number");
    return v.get<double>();
  }
  StatusOr<bool> Bool(const char* key, bool def) const {
    if (!Has(key)) return def;
    const json& v = obj_[key];
    if (!v.is_boolean()) return WrongType(key, "boolean");
    return v.get<bool>();
  }
  StatusOr<std::string> String(const char* key, const std::string& def) const {
    if (!Has(key)) return def;
    const json& v = obj_[key];
    if (!v.is_string()) return WrongType(key, "string");
    return v.get<std::string>();
  }
  // An integer or a list of integers (eos_token_id); absent -> empty.
  StatusOr<std::vector<int64_t>> IntOrList(const char* key) const {
    std::vector<int64_t> out;
    if (!Has(key)) return out;
    const json& v = obj_[key];
    if (v.is_number_integer()) {
      out.push_back(v.get<int64_t>());
      return out;
    }
    if (!v.is_array()) return WrongType(key, "integer or list of integers");
    for (const json& e : v) {
      if (!e.is_number_integer()) {
        return InvalidArgumentError(fmt::format("{}: key '{}': expected a list of integers, found "
                                                "an element of type {}",
                                                source_, Name(key), JsonTypeName(e)));
      }
      out.push_back(e.get<int64_t>());
    }
    return out;
  }

 private:
  const json& obj_;
  std::string source_;
  std::string prefix_;
};

// Narrows a parsed integer into an int field, naming the key when it cannot fit.
Status ToInt(const std::string& source, const std::string& key, int64_t v, int* out) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return OutOfRangeError(fmt::format("{}: key '{}' = {}: out of range", source, key, v));
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ParseRopeScaling(const Fields& cfg, const std::string& source, ModelConfig* c) {
  // transformers >= 5 nests rope settings in "rope_parameters"; older configs
  // use "rope_theta" + "rope_scaling".
  const char* key = cfg.Has("rope_scaling") ? "rope_scaling"
                    : cfg.Has("rope_parameters") ? "rope_parameters" : nullptr;
  if (key == nullptr) return Status::Ok();
  if (!cfg.At(key).is_object()) return cfg.WrongType(key, "object");
  Fields rs(cfg.At(key), source, std::string(key) + ".");
  if (rs.Has("rope_theta")) {
    ASSIGN_OR_RETURN(double theta, rs.Number("rope_theta", 10000.0));
    c->rope_theta = static_cast<float>(theta);
  }
  ASSIGN_OR_RETURN(std::string type, rs.String("rope_type", ""));
  if (type.empty()) {
    ASSIGN_OR_RETURN(type, rs.String("type", ""));
  }
  if (type.empty() || type == "default") return Status::Ok();
  if (type != "llama3" && type != "linear") {
    return UnsupportedError(fmt::format(
        "{}: key '{}.rope_type': RoPE scaling '{}' is not supported (supported: llama3, linear)",
        source, key, type));
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
  return Status::Ok();
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
  Fields cfg(root, source);
  ModelConfig c;

  // Architecture: architectures[0], else model_type.
  std::string arch_name;
  if (cfg.Has("architectures")) {
    const json& a = root["architectures"];
    if (!a.is_array()) return cfg.WrongType("architectures", "list of strings");
    if (!a.empty()) {
      if (!a[0].is_string()) {
        return InvalidArgumentError(fmt::format(
            "{}: key 'architectures': expected a list of strings, found an element of type {}",
            source, JsonTypeName(a[0])));
      }
      arch_name = a[0].get<std::string>();
    }
  }
  if (arch_name.empty()) {
    ASSIGN_OR_RETURN(std::string model_type, cfg.String("model_type", ""));
    if (model_type.empty()) {
      return NotFoundError(fmt::format(
          "{}: missing required key 'architectures' (or 'model_type'); supported: {}", source,
          kSupportedArchs));
    }
    static const std::pair<const char*, const char*> kTypes[] = {
        {"llama", "LlamaForCausalLM"},
        {"mistral", "MistralForCausalLM"},
        {"qwen2", "Qwen2ForCausalLM"},
        {"qwen3", "Qwen3ForCausalLM"}};
    arch_name = model_type;
    for (const auto& [t, a] : kTypes) {
      if (model_type == t) arch_name = a;
    }
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
  if (cfg.Has("head_dim")) {
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
  KeyNames key{EndsWith(source, ".gguf"), arch == "mistral" ? "llama" : arch};
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
    if (rope_scaling.type != "llama3" && rope_scaling.type != "linear") {
      return bad(key("rope_scaling.rope_type", "rope.scaling.type"), rope_scaling.type,
                 "'llama3' or 'linear'");
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

}  // namespace specd
