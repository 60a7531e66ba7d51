#include "loader/weight_names.h"

#include <cstdlib>

namespace specd {
namespace {

// llama.cpp per-block suffix -> HF per-layer suffix.
constexpr std::pair<const char*, const char*> kBlockNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

constexpr std::pair<const char*, const char*> kTopNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// Splits "<prefix><N>.<rest>" into N and rest; false if it does not match.
bool SplitLayer(const std::string& name, const std::string& prefix, int* layer, std::string* rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  size_t p = prefix.size();
  size_t dot = name.find('.', p);
  if (dot == std::string::npos || dot == p || dot - p > 6) return false;
  for (size_t k = p; k < dot; ++k) {
    if (name[k] < '0' || name[k] > '9') return false;
  }
  *layer = std::atoi(name.substr(p, dot - p).c_str());
  *rest = name.substr(dot + 1);
  return true;
}

// The DeepSeek-V2/V3 layer tensors (weight_names.h), without tensor_prefix.
void AppendMlaLayer(const ModelConfig& c, int l, std::vector<TensorSpec>* out) {
  const MlaConfig& m = c.mla;
  const MoeConfig& e = c.moe;
  const int64_t hidden = c.hidden_dim, heads = c.n_heads;
  const std::string p = "model.layers." + std::to_string(l) + ".";
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool norm) {
    out->push_back({p + name, std::move(shape), norm});
  };
  auto mlp = [&](const std::string& prefix, int64_t ffn) {
    add(prefix + "gate_proj.weight", {ffn, hidden}, false);
    add(prefix + "up_proj.weight", {ffn, hidden}, false);
    add(prefix + "down_proj.weight", {hidden, ffn}, false);
  };
  add("input_layernorm.weight", {hidden}, true);
  if (m.q_lora_rank > 0) {
    add("self_attn.q_a_proj.weight", {m.q_lora_rank, hidden}, false);
    add("self_attn.q_a_layernorm.weight", {m.q_lora_rank}, true);
    add("self_attn.q_b_proj.weight", {heads * m.qk_head_dim(), m.q_lora_rank}, false);
  } else {
    add("self_attn.q_proj.weight", {heads * m.qk_head_dim(), hidden}, false);
  }
  add("self_attn.kv_a_proj_with_mqa.weight", {m.latent_dim(), hidden}, false);
  add("self_attn.kv_a_layernorm.weight", {m.kv_lora_rank}, true);
  add("self_attn.kv_b_proj.weight", {heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank},
      false);
  add("self_attn.o_proj.weight", {hidden, heads * m.v_head_dim}, false);
  add("post_attention_layernorm.weight", {hidden}, true);
  if (!e.IsMoeLayer(l)) {
    mlp("mlp.", c.ffn_dim);
    return;
  }
  add("mlp.gate.weight", {e.n_routed_experts, hidden}, false);
  if (e.topk_method == "noaux_tc") {
    add("mlp.gate.e_score_correction_bias", {e.n_routed_experts}, true);
  }
  for (int x = 0; x < e.n_routed_experts; ++x) {
    mlp("mlp.experts." + std::to_string(x) + ".", e.expert_ffn_dim);
  }
  if (e.n_shared_experts > 0) {
    mlp("mlp.shared_experts.", int64_t{e.expert_ffn_dim} * e.n_shared_experts);
  }
}

std::vector<TensorSpec> ExpectedMlaTensors(const ModelConfig& c) {
  const int64_t hidden = c.hidden_dim;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, hidden}, false});
  for (int l = 0; l < c.n_layers; ++l) AppendMlaLayer(c, l, &out);
  out.push_back({"model.norm.weight", {hidden}, true});
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, hidden}, false});
  return out;
}

std::vector<TensorSpec> ExpectedLlamaTensors(const ModelConfig& c) {
  const int64_t hidden = c.hidden_dim, q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, hidden}, false});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {hidden}, true});
    out.push_back({p + "self_attn.q_proj.weight", {q_dim, hidden}, false});
    out.push_back({p + "self_attn.k_proj.weight", {kv_dim, hidden}, false});
    out.push_back({p + "self_attn.v_proj.weight", {kv_dim, hidden}, false});
    if (c.qkv_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {q_dim}, true});
      out.push_back({p + "self_attn.k_proj.bias", {kv_dim}, true});
      out.push_back({p + "self_attn.v_proj.bias", {kv_dim}, true});
    }
    out.push_back({p + "self_attn.o_proj.weight", {hidden, q_dim}, false});
    if (c.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, true});
      out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, true});
    }
    out.push_back({p + "post_attention_layernorm.weight", {hidden}, true});
    out.push_back({p + "mlp.gate_proj.weight", {c.ffn_dim, hidden}, false});
    out.push_back({p + "mlp.up_proj.weight", {c.ffn_dim, hidden}, false});
    out.push_back({p + "mlp.down_proj.weight", {hidden, c.ffn_dim}, false});
  }
  out.push_back({"model.norm.weight", {hidden}, true});
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, hidden}, false});
  return out;
}

}  // namespace

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& c) {
  std::vector<TensorSpec> out = c.IsMla() ? ExpectedMlaTensors(c) : ExpectedLlamaTensors(c);
  if (!c.tensor_prefix.empty()) {
    for (TensorSpec& s : out) s.name = c.tensor_prefix + s.name;
  }
  return out;
}

std::string GgufToHfName(const std::string& name) {
  for (const auto& [g, h] : kTopNames) {
    if (name == g) return h;
  }
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "blk.", &layer, &rest)) {
    for (const auto& [g, h] : kBlockNames) {
      if (rest == g) return "model.layers." + std::to_string(layer) + "." + h;
    }
  }
  return name;
}

std::string HfToGgufName(const std::string& name) {
  for (const auto& [g, h] : kTopNames) {
    if (name == h) return g;
  }
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "model.layers.", &layer, &rest)) {
    for (const auto& [g, h] : kBlockNames) {
      if (rest == h) return "blk." + std::to_string(layer) + "." + g;
    }
  }
  return name;
}

int64_t GgufRowToHfRow(int64_t gguf_row, int64_t rows, int n_head) {
  const int64_t head_dim = rows / n_head;
  const int64_t h = gguf_row / head_dim, w = gguf_row % head_dim;
  const int64_t i = w / 2, j = w % 2;
  return h * head_dim + j * (head_dim / 2) + i;
}

bool IsPermutedForGguf(const std::string& hf_name, const ModelConfig& c, int* n_head) {
  if (c.IsMla()) return false;  // llama.cpp's deepseek2 keeps the HF rows
  auto ends_with = [&](const char* s) {
    std::string suffix(s);
    return hf_name.size() >= suffix.size() &&
           hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".self_attn.q_proj.weight") || ends_with(".self_attn.q_proj.bias")) {
    *n_head = c.n_heads;
    return true;
  }
  if (ends_with(".self_attn.k_proj.weight") || ends_with(".self_attn.k_proj.bias")) {
    *n_head = c.n_kv_heads;
    return true;
  }
  return false;
}

}  // namespace specd
