#include "modelgen/gguf_deepseek2_writer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>

#include "base/logging.h"
#include "loader/gguf_deepseek2.h"
#include "loader/weight_names.h"
#include "modelgen/gguf_writer.h"

namespace specd {
namespace {

void SetMetadata(const ModelConfig& c, const GgufModelOptions& o, GgufWriter* w) {
  const MlaConfig& m = c.mla;
  const MoeConfig& e = c.moe;
  const std::string p = std::string(kDeepseek2Arch) + ".";
  auto u32 = [&](const char* key, int64_t v) { w->SetU32(p + key, static_cast<uint32_t>(v)); };
  auto f32 = [&](const char* key, float v) { w->SetF32(p + key, v); };
  w->SetString("general.architecture", kDeepseek2Arch);
  w->SetString("general.name", o.name);
  // The converter's order (TextModel.set_gguf_parameters, then DeepseekV2Model's).
  u32("block_count", c.n_layers);
  u32("context_length", c.max_seq_len);
  u32("embedding_length", c.hidden_dim);
  u32("feed_forward_length", c.ffn_dim);
  u32("attention.head_count", c.n_heads);
  u32("attention.head_count_kv", 1);  // MLA as MQA over the latent
  const RopeScaling& y = c.rope_scaling;
  if (y.type == "yarn") {
    w->SetString(p + "rope.scaling.type", "yarn");
    f32("rope.scaling.factor", y.factor);
    u32("rope.scaling.original_context_length", y.original_max_position);
    f32("rope.scaling.yarn_beta_fast", y.beta_fast);
    f32("rope.scaling.yarn_beta_slow", y.beta_slow);
  } else if (y.type == "linear") {
    w->SetString(p + "rope.scaling.type", "linear");
    f32("rope.scaling.factor", y.factor);
  }
  f32("rope.freq_base", c.rope_theta);
  f32("attention.layer_norm_rms_epsilon", c.norm_eps);
  const bool moe = e.n_routed_experts > 0;
  if (moe) {
    const bool greedy = e.topk_method == "greedy";
    u32("expert_count", e.n_routed_experts);
    u32("expert_used_count", e.top_k);
    u32("expert_group_count", greedy ? 1 : e.n_group);
    u32("expert_group_used_count", greedy ? 1 : e.topk_group);
    u32("expert_gating_func", e.scoring == "sigmoid" ? 2 : 1);
  }
  u32("attention.key_length", m.kv_lora_rank + m.qk_rope_head_dim);
  u32("attention.value_length", m.kv_lora_rank);
  w->SetU32("general.file_type", GgufFileType(o.dtype));
  u32("leading_dense_block_count", moe ? e.first_k_dense : c.n_layers);
  u32("vocab_size", c.vocab_size);
  u32("attention.q_lora_rank", m.q_lora_rank);
  u32("attention.kv_lora_rank", m.kv_lora_rank);
  u32("attention.key_length_mla", m.qk_head_dim());
  u32("attention.value_length_mla", m.v_head_dim);
  u32("expert_feed_forward_length", moe ? e.expert_ffn_dim : c.ffn_dim);
  u32("expert_shared_count", moe ? e.n_shared_experts : 0);
  if (moe) {
    f32("expert_weights_scale", e.routed_scaling_factor);
    if (e.norm_topk_prob) w->SetBool(p + "expert_weights_norm", true);
  }
  u32("rope.dimension_count", m.qk_rope_head_dim);
  if (y.type == "yarn" && y.mscale_all_dim != 0.f) {
    f32("rope.scaling.yarn_log_multiplier",
        static_cast<float>(0.1 * static_cast<double>(y.mscale_all_dim)));
  }
}

// The HF weights by name, with shape checks that name the tensor.
class Weights {
 public:
  // Names may carry `prefix` (Kimi-K2.5's "language_model.") or not; others
  // (a vision tower) are simply never asked for.
  Weights(const std::vector<WeightSource>& ws, const std::string& prefix) {
    for (const WeightSource& s : ws) {
      const bool prefixed = !prefix.empty() && s.name.compare(0, prefix.size(), prefix) == 0;
      by_name_[prefixed ? s.name.substr(prefix.size()) : s.name] = &s;
    }
  }
  StatusOr<const WeightSource*> Get(const std::string& name,
                                    const std::vector<int64_t>& shape) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return NotFoundError(fmt::format("deepseek2 GGUF: missing weight '{}' (expected shape {})",
                                       name, ShapeToString(shape)));
    }
    if (it->second->shape != shape) {
      return InvalidArgumentError(fmt::format("deepseek2 GGUF: weight '{}': expected shape {}, "
                                              "found {}",
                                              name, ShapeToString(shape),
                                              ShapeToString(it->second->shape)));
    }
    return it->second;
  }

 private:
  std::map<std::string, const WeightSource*> by_name_;
};

// attn_k_b (heads, r, nope) and attn_v_b (heads, v, r) from kv_b_proj
// (heads * (nope + v), r): row (h, j) of k_b is column j of head h's first
// nope kv_b rows. Rows are asked for in order, so one head is cached.
RowFn KbRows(RowFn kvb, int64_t nope, int64_t v, int64_t r) {
  struct Cache {
    int64_t head = -1;
    std::vector<float> rows;  // nope x r
  };
  auto cache = std::make_shared<Cache>();
  cache->rows.resize(static_cast<size_t>(nope * r));
  return [kvb, cache, nope, v, r](int64_t g, float* out) {
    const int64_t h = g / r, j = g % r;
    if (cache->head != h) {
      for (int64_t i = 0; i < nope; ++i) kvb(h * (nope + v) + i, &cache->rows[i * r]);
      cache->head = h;
    }
    for (int64_t i = 0; i < nope; ++i) out[i] = cache->rows[i * r + j];
  };
}

RowFn VbRows(RowFn kvb, int64_t nope, int64_t v) {
  return [kvb, nope, v](int64_t g, float* out) { kvb(g / v * (nope + v) + nope + g % v, out); };
}

// ffn_*_exps (experts, rows, cols): expert g / rows, its row g % rows.
RowFn StackedRows(std::vector<RowFn> experts, int64_t rows) {
  return [experts = std::move(experts), rows](int64_t g, float* out) {
    experts[static_cast<size_t>(g / rows)](g % rows, out);
  };
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Status WriteDeepseek2Gguf(const ModelConfig& c, const std::vector<WeightSource>& weights,
                          const GgufModelOptions& options, const std::string& path) {
  const MlaConfig& m = c.mla;
  const MoeConfig& e = c.moe;
  if (!c.IsMla()) {
    return InvalidArgumentError(fmt::format("deepseek2 GGUF: architecture '{}' has no MLA", c.arch));
  }
  if (e.n_routed_experts > 0 && e.layer_freq != 1) {
    return UnsupportedError(fmt::format(
        "{}: moe_layer_freq = {} cannot be written as llama.cpp's deepseek2 (every layer from "
        "leading_dense_block_count on is MoE; expected 1)",
        path, e.layer_freq));
  }
  if (c.rope_style != RopeStyle::kInterleaved) {
    return UnsupportedError(fmt::format(
        "{}: rope_interleave = false (rotate_half RoPE) cannot be written as llama.cpp's deepseek2, "
        "which rotates adjacent pairs",
        path));
  }
  const DType dtype = options.dtype;
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kQ8_0 && dtype != DType::kQ4_0) {
    return InvalidArgumentError(fmt::format("{}: dtype {} cannot be written (supported: f32, f16, "
                                            "bf16, q8_0, q4_0)",
                                            path, DTypeName(dtype)));
  }
  const RopeScaling& y = c.rope_scaling;
  if (y.type == "yarn" && y.mscale_all_dim != 0.f && y.mscale != 0.f &&
      y.mscale != (y.mscale_all_dim != 1.f ? y.mscale_all_dim : 1.f)) {
    LOG_WARN("write gguf", "{}: YaRN mscale {} is not stored: llama.cpp assumes mscale {} for "
             "mscale_all_dim {}",
             path, y.mscale, y.mscale_all_dim != 1.f ? y.mscale_all_dim : 1.f, y.mscale_all_dim);
  }

  GgufWriter w;
  SetMetadata(c, options, &w);
  SetTokenizerKeys(options.vocab, c.bos_id, c.eos_ids, &w);

  ModelConfig plain = c;
  plain.tensor_prefix.clear();
  // A deepseek2 GGUF always holds output.weight (the architecture has no tied
  // head, and llama.cpp requires the tensor): a tied config's head is written
  // as a copy of the embedding.
  plain.tie_embeddings = false;
  const Weights ws(weights, c.tensor_prefix);
  int n_fallback = 0;
  std::string first_fallback;
  auto add = [&](const std::string& name, const std::vector<int64_t>& shape, RowFn rows) {
    DType dt = dtype;
    if (shape.size() < 2 || EndsWith(name, "ffn_gate_inp.weight")) dt = DType::kF32;
    if (shape.back() % DTypeBlockElems(dt) != 0) {
      if (n_fallback++ == 0) first_fallback = fmt::format("{} ({} columns)", name, shape.back());
      dt = DType::kF16;
    }
    return w.AddTensor(name, dt, shape, std::move(rows));
  };
  const int64_t heads = c.n_heads, nope = m.qk_nope_head_dim, v = m.v_head_dim,
                r = m.kv_lora_rank;
  for (const TensorSpec& spec : ExpectedTensors(plain)) {
    // kv_b_proj has a legacy one-to-one name (attn_kv_b) that llama.cpp
    // b11312 no longer loads: it is split below.
    const bool kv_b = EndsWith(spec.name, ".self_attn.kv_b_proj.weight");
    const std::string gguf = kv_b ? "" : Deepseek2HfToGgufName(spec.name);
    if (!gguf.empty()) {
      const bool tied_head = c.tie_embeddings && spec.name == "lm_head.weight";
      ASSIGN_OR_RETURN(const WeightSource* s,
                       ws.Get(tied_head ? "model.embed_tokens.weight" : spec.name, spec.shape));
      RETURN_IF_ERROR(add(gguf, spec.shape, s->rows));
      continue;
    }
    const std::string layer_prefix = "model.layers.";
    const size_t dot = spec.name.find('.', layer_prefix.size());
    const std::string layer = spec.name.substr(layer_prefix.size(), dot - layer_prefix.size());
    const std::string rest = spec.name.substr(dot + 1);
    const std::string blk = "blk." + layer + ".";
    if (kv_b) {
      ASSIGN_OR_RETURN(const WeightSource* s, ws.Get(spec.name, spec.shape));
      RETURN_IF_ERROR(add(blk + "attn_k_b.weight", {heads, r, nope}, KbRows(s->rows, nope, v, r)));
      RETURN_IF_ERROR(add(blk + "attn_v_b.weight", {heads, v, r}, VbRows(s->rows, nope, v)));
      continue;
    }
    // mlp.experts.<E>.<proj>.weight: stacked when expert 0 comes by.
    const std::string experts = "mlp.experts.";
    if (rest.compare(0, experts.size(), experts) != 0) {
      return InternalError("deepseek2 GGUF: no GGUF name for " + spec.name);
    }
    const size_t edot = rest.find('.', experts.size());
    if (rest.substr(experts.size(), edot - experts.size()) != "0") continue;
    const std::string proj = rest.substr(edot + 1);  // "gate_proj.weight"
    std::vector<RowFn> rows;
    for (int x = 0; x < e.n_routed_experts; ++x) {
      const std::string name = layer_prefix + layer + "." + experts + std::to_string(x) + "." + proj;
      ASSIGN_OR_RETURN(const WeightSource* s, ws.Get(name, spec.shape));
      rows.push_back(s->rows);
    }
    const std::string kind = proj.substr(0, proj.find('_'));  // gate | up | down
    RETURN_IF_ERROR(add(blk + "ffn_" + kind + "_exps.weight",
                        {e.n_routed_experts, spec.shape[0], spec.shape[1]},
                        StackedRows(std::move(rows), spec.shape[0])));
  }
  if (n_fallback > 0) {
    LOG_INFO("write gguf", "{} tensors written as f16 instead of {}: rows not a multiple of {} "
             "(first: {})",
             n_fallback, DTypeName(dtype), DTypeBlockElems(dtype), first_fallback);
  }
  return w.Write(path);
}

}  // namespace specd
