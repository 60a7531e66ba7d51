#include "loader/gguf_deepseek2.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <vector>

#include "loader/weight_names.h"

namespace specd {
namespace {

constexpr std::pair<const char*, const char*> kTopNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// GGUF per-block suffix -> HF per-layer suffix (one tensor each).
constexpr std::pair<const char*, const char*> kBlockNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
};

// "<prefix><N>.<rest>" -> N, rest.
bool SplitLayer(const std::string& name, const std::string& prefix, int* layer, std::string* rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t p = prefix.size(), dot = name.find('.', p);
  if (dot == std::string::npos || dot == p || dot - p > 6) return false;
  for (size_t k = p; k < dot; ++k) {
    if (name[k] < '0' || name[k] > '9') return false;
  }
  *layer = std::atoi(name.substr(p, dot - p).c_str());
  *rest = name.substr(dot + 1);
  return true;
}

std::string Blk(int layer, const std::string& suffix) {
  return "blk." + std::to_string(layer) + "." + suffix;
}

// ---- metadata ----

class Meta {
 public:
  explicit Meta(const GgufFile& f) : f_(f) {}
  const GgufFile& file() const { return f_; }
  std::string Key(const char* suffix) const { return std::string(kDeepseek2Arch) + "." + suffix; }
  bool Has(const char* suffix) const { return f_.Has(Key(suffix)); }

  Status Int(const char* suffix, int* out) const {
    const std::string key = Key(suffix);
    ASSIGN_OR_RETURN(int64_t v, f_.GetInt(key));
    if (v < 0 || v > std::numeric_limits<int>::max()) {
      return OutOfRangeError(fmt::format("{}: key '{}' = {}: expected a value in [0, {}]", f_.path,
                                         key, v, std::numeric_limits<int>::max()));
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  }
  // def < 0: the key is required.
  Status Int(const char* suffix, int def, int* out) const {
    if (!Has(suffix) && def >= 0) {
      *out = def;
      return Status::Ok();
    }
    return Int(suffix, out);
  }
  Status Float(const char* suffix, float def, float* out) const {
    if (!Has(suffix)) {
      *out = def;
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(double v, f_.GetFloat(Key(suffix)));
    *out = static_cast<float>(v);
    return Status::Ok();
  }
  Status Bad(const char* suffix, int64_t found, const std::string& expected) const {
    return InvalidArgumentError(
        fmt::format("{}: key '{}' = {}: expected {}", f_.path, Key(suffix), found, expected));
  }

 private:
  const GgufFile& f_;
};

Status ReadMla(const Meta& m, ModelConfig* c) {
  MlaConfig& a = c->mla;
  RETURN_IF_ERROR(m.Int("attention.q_lora_rank", 0, &a.q_lora_rank));
  RETURN_IF_ERROR(m.Int("attention.kv_lora_rank", &a.kv_lora_rank));
  RETURN_IF_ERROR(m.Int("rope.dimension_count", &a.qk_rope_head_dim));
  const int rot = a.qk_rope_head_dim;
  int k_len = 0, v_len = 0, kv_heads = 0;
  RETURN_IF_ERROR(m.Int("attention.key_length_mla", 0, &k_len));
  RETURN_IF_ERROR(m.Int("attention.value_length_mla", 0, &v_len));
  const char* k_key = "attention.key_length_mla";
  if (k_len != 0 && v_len != 0) {
    // Current layout: MLA stored as MQA over the latent (kv_lora_rank + rope).
    RETURN_IF_ERROR(m.Int("attention.head_count_kv", 1, &kv_heads));
    if (kv_heads != 1) {
      return m.Bad("attention.head_count_kv", kv_heads, "1 in a file with attention.key_length_mla");
    }
    int k_full = 0, v_full = 0;
    RETURN_IF_ERROR(m.Int("attention.key_length", a.kv_lora_rank + rot, &k_full));
    RETURN_IF_ERROR(m.Int("attention.value_length", a.kv_lora_rank, &v_full));
    if (k_full != a.kv_lora_rank + rot) {
      return m.Bad("attention.key_length", k_full,
                   fmt::format("kv_lora_rank + rope.dimension_count = {}", a.kv_lora_rank + rot));
    }
    if (v_full != a.kv_lora_rank) {
      return m.Bad("attention.value_length", v_full,
                   fmt::format("kv_lora_rank = {}", a.kv_lora_rank));
    }
  } else {
    // Legacy layout (before llama.cpp split attn_kv_b): per-head K and V sizes.
    if (k_len != 0 || v_len != 0) {
      const char* missing = k_len == 0 ? "attention.key_length_mla" : "attention.value_length_mla";
      return m.Bad(missing, 0, "a non-zero value (both *_mla keys or neither)");
    }
    k_key = "attention.key_length";
    RETURN_IF_ERROR(m.Int("attention.key_length", &k_len));
    RETURN_IF_ERROR(m.Int("attention.value_length", &v_len));
    RETURN_IF_ERROR(m.Int("attention.head_count_kv", c->n_heads, &kv_heads));
    if (kv_heads != c->n_heads) {
      return m.Bad("attention.head_count_kv", kv_heads,
                   fmt::format("attention.head_count ({}) in a file without *_mla keys", c->n_heads));
    }
  }
  if (k_len <= rot) {
    return m.Bad(k_key, k_len,
                 fmt::format("more than rope.dimension_count ({}): qk_nope + qk_rope", rot));
  }
  a.qk_nope_head_dim = k_len - rot;
  a.v_head_dim = v_len;
  c->head_dim = rot;
  c->n_kv_heads = c->n_heads;
  c->rope_style = RopeStyle::kInterleaved;
  return Status::Ok();
}

Status ReadMoe(const Meta& m, ModelConfig* c) {
  MoeConfig& e = c->moe;
  int gating = 0;
  RETURN_IF_ERROR(m.Int("expert_gating_func", 1, &gating));
  if (gating == 0) gating = 1;  // llama.cpp: "none" in old DeepSeek-V2 files means softmax
  if (gating != 1 && gating != 2) {
    return m.Bad("expert_gating_func", gating, "1 (softmax) or 2 (sigmoid)");
  }
  c->arch = gating == 2 ? "deepseek_v3" : "deepseek_v2";
  e.scoring = gating == 2 ? "sigmoid" : "softmax";
  RETURN_IF_ERROR(m.Int("expert_count", 0, &e.n_routed_experts));
  e.layer_freq = 1;
  // A dense model (no experts) keeps the MoE defaults, as config.json parsing does.
  if (e.n_routed_experts == 0) return Status::Ok();
  RETURN_IF_ERROR(m.Int("expert_used_count", &e.top_k));
  RETURN_IF_ERROR(m.Int("expert_feed_forward_length", &e.expert_ffn_dim));
  RETURN_IF_ERROR(m.Int("expert_shared_count", &e.n_shared_experts));
  RETURN_IF_ERROR(m.Int("leading_dense_block_count", 0, &e.first_k_dense));
  RETURN_IF_ERROR(m.Int("expert_group_count", 1, &e.n_group));
  RETURN_IF_ERROR(m.Int("expert_group_used_count", 1, &e.topk_group));
  e.n_group = std::max(e.n_group, 1);
  e.topk_group = std::max(e.topk_group, 1);
  RETURN_IF_ERROR(m.Float("expert_weights_scale", 1.f, &e.routed_scaling_factor));
  if (e.routed_scaling_factor == 0.f) e.routed_scaling_factor = 1.f;  // llama.cpp: unset
  e.norm_topk_prob = false;
  if (m.Has("expert_weights_norm")) {
    ASSIGN_OR_RETURN(e.norm_topk_prob, m.file().GetBool(m.Key("expert_weights_norm")));
  }
  if (gating == 2) {
    e.topk_method = "noaux_tc";
  } else {
    e.topk_method = e.n_group > 1 ? "group_limited_greedy" : "greedy";
  }
  return Status::Ok();
}

Status ReadRope(const Meta& m, ModelConfig* c) {
  RETURN_IF_ERROR(m.Float("rope.freq_base", 10000.f, &c->rope_theta));
  std::string type = "none";
  if (m.Has("rope.scaling.type")) {
    ASSIGN_OR_RETURN(type, m.file().GetString(m.Key("rope.scaling.type")));
  }
  RopeScaling& s = c->rope_scaling;
  if (type == "none") return Status::Ok();
  if (type != "linear" && type != "yarn") {
    return UnsupportedError(fmt::format("{}: key '{}': RoPE scaling '{}' is not supported for "
                                        "deepseek2 (supported: none, linear, yarn)",
                                        m.file().path, m.Key("rope.scaling.type"), type));
  }
  s.type = type;
  RETURN_IF_ERROR(m.Float("rope.scaling.factor", 1.f, &s.factor));
  if (type == "linear") return Status::Ok();
  RETURN_IF_ERROR(m.Int("rope.scaling.original_context_length", c->max_seq_len,
                        &s.original_max_position));
  RETURN_IF_ERROR(m.Float("rope.scaling.yarn_beta_fast", 32.f, &s.beta_fast));
  RETURN_IF_ERROR(m.Float("rope.scaling.yarn_beta_slow", 1.f, &s.beta_slow));
  float log_mul = 0.f;
  RETURN_IF_ERROR(m.Float("rope.scaling.yarn_log_multiplier", 0.f, &log_mul));
  // The converter stores 0.1 * mscale_all_dim; llama.cpp takes mscale to be
  // mscale_all_dim unless that is 1 (DeepSeek-V2-Lite: both 0.707; V3: both 1).
  s.mscale_all_dim = static_cast<float>(static_cast<double>(log_mul) / 0.1);
  s.mscale = s.mscale_all_dim == 0.f ? 0.f : s.mscale_all_dim != 1.f ? s.mscale_all_dim : 1.f;
  return Status::Ok();
}

const GgufTensorInfo* FindTensor(const GgufFile& f, const std::string& name) {
  for (const GgufTensorInfo& t : f.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// ---- tensors ----

std::string NeString(const std::vector<int64_t>& ne) {
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

std::vector<int64_t> Reversed(const std::vector<int64_t>& v) { return {v.rbegin(), v.rend()}; }

class TensorBuilder {
 public:
  TensorBuilder(const GgufFile& f, const uint8_t* file_data, CheckpointBuilder* ck)
      : f_(f), base_(file_data + f.data_offset), ck_(ck), c_(ck->config()) {}

  TensorView View(const GgufTensorInfo& ti, std::string name) const {
    TensorView t;
    t.name = std::move(name);
    t.dtype = ti.dtype;
    t.shape = Reversed(ti.ne);
    t.data = base_ + ti.offset;
    t.nbytes = ti.nbytes;
    return t;
  }

  Status Add(TensorView t, const std::string& gguf_name) {
    const std::string name = t.name;
    if (!ck_->mutable_tensors().emplace(name, std::move(t)).second) {
      return CorruptionError(fmt::format("{}: tensor '{}' maps to '{}', which another tensor "
                                         "already has",
                                         f_.path, gguf_name, name));
    }
    return Status::Ok();
  }

  Status CheckNe(const GgufTensorInfo& ti, const std::vector<int64_t>& want,
                 const std::string& what) const {
    if (ti.ne == want) return Status::Ok();
    return CorruptionError(fmt::format("{}: tensor '{}': expected ne {} ({}), found {}", f_.path,
                                       ti.name, NeString(want), what, NeString(ti.ne)));
  }

  // ffn_{gate,up,down}_exps / ffn_gate_up_exps of `layer`.
  Status SplitExperts(const GgufTensorInfo& ti, int layer, const std::string& kind) {
    const MoeConfig& e = c_.moe;
    const int64_t hidden = c_.hidden_dim, ff = e.expert_ffn_dim;
    if (!e.IsMoeLayer(layer)) {
      return CorruptionError(fmt::format(
          "{}: tensor '{}': layer {} is dense (deepseek2.leading_dense_block_count = {}, "
          "expert_count = {}) but the file holds expert tensors for it",
          f_.path, ti.name, layer, e.first_k_dense, e.n_routed_experts));
    }
    if (ti.ne.size() != 3 || ti.ne[2] != e.n_routed_experts) {
      return CorruptionError(fmt::format(
          "{}: tensor '{}': expected a 3-D tensor of {} experts (deepseek2.expert_count) in its "
          "last dimension, found ne {}",
          f_.path, ti.name, e.n_routed_experts, NeString(ti.ne)));
    }
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
    struct Part {
      const char* proj;
      int64_t row0;
    };
    std::vector<Part> parts;
    if (kind == "ffn_down_exps") {
      RETURN_IF_ERROR(CheckNe(ti, {ff, hidden, e.n_routed_experts},
                              "expert_feed_forward_length, embedding_length, expert_count"));
      parts = {{"down_proj", 0}};
    } else if (kind == "ffn_gate_up_exps") {
      RETURN_IF_ERROR(CheckNe(ti, {hidden, 2 * ff, e.n_routed_experts},
                              "embedding_length, 2 * expert_feed_forward_length, expert_count"));
      parts = {{"gate_proj", 0}, {"up_proj", ff}};
    } else {
      RETURN_IF_ERROR(CheckNe(ti, {hidden, ff, e.n_routed_experts},
                              "embedding_length, expert_feed_forward_length, expert_count"));
      parts = {{kind == "ffn_gate_exps" ? "gate_proj" : "up_proj", 0}};
    }
    const int64_t rows = ti.ne[1], cols = ti.ne[0];
    const size_t row_bytes = RowBytes(ti.dtype, cols);
    const int64_t part_rows = kind == "ffn_gate_up_exps" ? ff : rows;
    for (int64_t x = 0; x < e.n_routed_experts; ++x) {
      for (const Part& part : parts) {
        TensorView t;
        t.name = p + std::to_string(x) + "." + part.proj + ".weight";
        t.dtype = ti.dtype;
        t.shape = {part_rows, cols};
        t.data = base_ + ti.offset + (static_cast<size_t>(x * rows + part.row0)) * row_bytes;
        t.nbytes = static_cast<size_t>(part_rows) * row_bytes;
        RETURN_IF_ERROR(Add(std::move(t), ti.name));
      }
    }
    return Status::Ok();
  }

  // kv_b_proj of `layer` from attn_k_b + attn_v_b (header comment).
  Status BuildKvB(int layer, const GgufTensorInfo* kb, const GgufTensorInfo* vb) {
    const std::string kv_name = Blk(layer, "attn_kv_b.weight");
    if (kb == nullptr || vb == nullptr) {
      return NotFoundError(fmt::format(
          "{}: missing tensor '{}' (and no '{}'): layer {} needs attn_k_b and attn_v_b, or "
          "attn_kv_b",
          f_.path, Blk(layer, kb == nullptr ? "attn_k_b.weight" : "attn_v_b.weight"), kv_name,
          layer));
    }
    const MlaConfig& m = c_.mla;
    const int64_t heads = c_.n_heads, nope = m.qk_nope_head_dim, v = m.v_head_dim,
                  r = m.kv_lora_rank;
    RETURN_IF_ERROR(CheckNe(*kb, {nope, r, heads},
                            "key_length_mla - rope.dimension_count, kv_lora_rank, head_count"));
    RETURN_IF_ERROR(CheckNe(*vb, {r, v, heads}, "kv_lora_rank, value_length_mla, head_count"));
    auto is_float = [](DType t) {
      return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
    };
    const DType out = kb->dtype == vb->dtype && is_float(kb->dtype) ? kb->dtype : DType::kF32;
    const size_t out_row = RowBytes(out, r), kb_row = RowBytes(kb->dtype, nope),
                 vb_row = RowBytes(vb->dtype, r);
    std::vector<uint8_t> bytes(out_row * static_cast<size_t>(heads * (nope + v)));
    std::vector<float> k(static_cast<size_t>(r * nope)), row(static_cast<size_t>(r));
    const uint8_t* kd = base_ + kb->offset;
    const uint8_t* vd = base_ + vb->offset;
    for (int64_t h = 0; h < heads; ++h) {
      uint8_t* dst = bytes.data() + static_cast<size_t>(h * (nope + v)) * out_row;
      // k_b head h: r rows of nope values (W_UKᵀ); kv_b wants nope rows of r.
      for (int64_t j = 0; j < r; ++j) {
        DequantizeRow(kb->dtype, kd + static_cast<size_t>(h * r + j) * kb_row, &k[j * nope], nope);
      }
      for (int64_t i = 0; i < nope; ++i) {
        for (int64_t j = 0; j < r; ++j) row[j] = k[j * nope + i];
        QuantizeRow(out, row.data(), dst + static_cast<size_t>(i) * out_row, r);
      }
      for (int64_t i = 0; i < v; ++i) {
        DequantizeRow(vb->dtype, vd + static_cast<size_t>(h * v + i) * vb_row, row.data(), r);
        QuantizeRow(out, row.data(), dst + static_cast<size_t>(nope + i) * out_row, r);
      }
    }
    TensorView t;
    t.name = "model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj.weight";
    t.dtype = out;
    t.shape = {heads * (nope + v), r};
    t.data = bytes.data();
    t.nbytes = bytes.size();
    ck_->AddOwned(std::move(bytes));
    return Add(std::move(t), kb->name);
  }

 private:
  const GgufFile& f_;
  const uint8_t* base_;
  CheckpointBuilder* ck_;
  const ModelConfig& c_;
};

// The GGUF tensor an expected HF tensor comes from, for error messages.
std::string GgufSourceOf(const std::string& hf) {
  if (std::string g = Deepseek2HfToGgufName(hf); !g.empty()) return g;
  int layer = 0;
  std::string rest;
  if (!SplitLayer(hf, "model.layers.", &layer, &rest)) return hf;
  if (rest == "self_attn.kv_b_proj.weight") {
    return Blk(layer, "attn_k_b.weight") + "' + '" + Blk(layer, "attn_v_b.weight");
  }
  for (const char* proj : {"gate", "up", "down"}) {
    if (rest.find(std::string(".") + proj + "_proj.weight") != std::string::npos &&
        rest.rfind("mlp.experts.", 0) == 0) {
      return Blk(layer, std::string("ffn_") + proj + "_exps.weight");
    }
  }
  return hf;
}

}  // namespace

std::string Deepseek2GgufToHfName(const std::string& name) {
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
  return "";
}

std::string Deepseek2HfToGgufName(const std::string& name) {
  for (const auto& [g, h] : kTopNames) {
    if (name == h) return g;
  }
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "model.layers.", &layer, &rest)) {
    for (const auto& [g, h] : kBlockNames) {
      if (rest == h) return Blk(layer, g);
    }
  }
  return "";
}

StatusOr<ModelConfig> Deepseek2ConfigFromGguf(const GgufFile& f, const GgufVocab& vocab) {
  Meta m(f);
  ModelConfig c;
  int block_count = 0, nextn = 0;
  RETURN_IF_ERROR(m.Int("block_count", &block_count));
  RETURN_IF_ERROR(m.Int("nextn_predict_layers", 0, &nextn));
  if (nextn >= block_count) {
    return m.Bad("nextn_predict_layers", nextn,
                 fmt::format("fewer than block_count ({})", block_count));
  }
  c.n_layers = block_count - nextn;  // MTP blocks come last and are not run
  c.n_mtp_layers = nextn;
  RETURN_IF_ERROR(m.Int("embedding_length", &c.hidden_dim));
  RETURN_IF_ERROR(m.Int("context_length", &c.max_seq_len));
  RETURN_IF_ERROR(m.Int("attention.head_count", &c.n_heads));
  ASSIGN_OR_RETURN(double eps, f.GetFloat(m.Key("attention.layer_norm_rms_epsilon")));
  c.norm_eps = static_cast<float>(eps);
  RETURN_IF_ERROR(ReadMla(m, &c));
  RETURN_IF_ERROR(ReadMoe(m, &c));
  // Only dense layers use feed_forward_length (the converter always writes it).
  const bool all_moe = c.moe.n_routed_experts > 0 && c.moe.first_k_dense == 0;
  RETURN_IF_ERROR(m.Int("feed_forward_length", all_moe ? c.moe.expert_ffn_dim : -1, &c.ffn_dim));
  RETURN_IF_ERROR(ReadRope(m, &c));

  if (m.Has("vocab_size")) {
    RETURN_IF_ERROR(m.Int("vocab_size", &c.vocab_size));
  } else if (!vocab.tokens.empty()) {
    c.vocab_size = static_cast<int>(vocab.tokens.size());
  } else if (const GgufTensorInfo* t = FindTensor(f, "token_embd.weight");
             t != nullptr && t->ne.size() == 2) {
    c.vocab_size = static_cast<int>(t->ne[1]);
  }
  // The deepseek2 architecture never ties its output head to the embedding
  // (llama.cpp requires output.weight too): a missing one is an error.
  c.tie_embeddings = false;
  c.bos_id = vocab.bos_id;
  if (vocab.eos_id >= 0) c.eos_ids.push_back(vocab.eos_id);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!f.Has(key)) continue;
    ASSIGN_OR_RETURN(int64_t id, f.GetInt(key));
    if (id >= 0 && id < c.vocab_size &&
        std::find(c.eos_ids.begin(), c.eos_ids.end(), id) == c.eos_ids.end()) {
      c.eos_ids.push_back(static_cast<int>(id));
    }
  }
  RETURN_IF_ERROR(c.Validate(f.path));
  return c;
}

Status LoadDeepseek2Gguf(const GgufFile& f, const uint8_t* file_data, CheckpointBuilder* ck) {
  ASSIGN_OR_RETURN(ck->mutable_config(), Deepseek2ConfigFromGguf(f, ck->gguf_vocab()));
  const ModelConfig& c = ck->config();
  TensorBuilder b(f, file_data, ck);
  std::map<int, const GgufTensorInfo*> k_b, v_b;
  for (const GgufTensorInfo& ti : f.tensors) {
    int layer = -1;
    std::string rest;
    const bool in_block = SplitLayer(ti.name, "blk.", &layer, &rest);
    if (in_block && layer < c.n_layers && c.moe.n_shared_experts == 0 &&
        rest.find("_shexp.") != std::string::npos) {
      return CorruptionError(fmt::format(
          "{}: tensor '{}' holds a shared expert, but deepseek2.expert_shared_count is 0 (set "
          "the count the file was made with, or drop the tensor)",
          f.path, ti.name));
    }
    std::string hf = Deepseek2GgufToHfName(ti.name);
    if (in_block && layer >= c.n_layers) hf.clear();  // MTP blocks keep GGUF names
    if (!hf.empty()) {
      RETURN_IF_ERROR(b.Add(b.View(ti, hf), ti.name));
    } else if (in_block && layer < c.n_layers &&
               (rest == "ffn_gate_exps.weight" || rest == "ffn_up_exps.weight" ||
                rest == "ffn_down_exps.weight" || rest == "ffn_gate_up_exps.weight")) {
      RETURN_IF_ERROR(b.SplitExperts(ti, layer, rest.substr(0, rest.size() - 7)));
    } else if (in_block && layer < c.n_layers && rest == "attn_k_b.weight") {
      k_b[layer] = &ti;
    } else if (in_block && layer < c.n_layers && rest == "attn_v_b.weight") {
      v_b[layer] = &ti;
    } else {
      RETURN_IF_ERROR(b.Add(b.View(ti, ti.name), ti.name));
    }
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string kv = "model.layers." + std::to_string(l) + ".self_attn.kv_b_proj.weight";
    if (ck->Has(kv)) continue;  // a legacy attn_kv_b
    RETURN_IF_ERROR(b.BuildKvB(l, k_b.count(l) ? k_b[l] : nullptr, v_b.count(l) ? v_b[l] : nullptr));
  }
  // Every tensor the config implies, with its shape, named as the file names it.
  for (const TensorSpec& spec : ExpectedTensors(c)) {
    auto it = ck->tensors().find(spec.name);
    if (it == ck->tensors().end()) {
      return NotFoundError(fmt::format("{}: missing tensor '{}' (for {}, expected ne {})", f.path,
                                       GgufSourceOf(spec.name), spec.name,
                                       NeString(Reversed(spec.shape))));
    }
    if (it->second.shape != spec.shape) {
      return CorruptionError(fmt::format("{}: tensor '{}' (for {}): expected ne {} (from the GGUF "
                                         "metadata), found {}",
                                         f.path, GgufSourceOf(spec.name), spec.name,
                                         NeString(Reversed(spec.shape)),
                                         NeString(Reversed(it->second.shape))));
    }
  }
  return Status::Ok();
}

}  // namespace specd
