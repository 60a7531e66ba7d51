// ModelConfig: one description of a model (the Llama family, or the
// DeepSeek-V2/V3 family: Kimi-K2, Moonlight), filled from a Hugging Face
// config.json or from GGUF metadata, and validated in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace specd {

// How RoPE pairs dimensions within a head.
//  kHalf (HF / GPT-NeoX "rotate_half"): pairs (i, i + head_dim/2).
//  kInterleaved (llama.cpp's LLaMA layout, original Meta): pairs (2i, 2i+1).
// GGUF `llama` checkpoints have q/k rows permuted for kInterleaved; rather than
// un-permuting (which would copy quantized weights), the engine rotates those
// models with kInterleaved, which gives identical results.
enum class RopeStyle { kHalf, kInterleaved };

struct RopeScaling {
  std::string type;  // "" (none), "llama3", "linear", "yarn"
  float factor = 1.f;
  float low_freq_factor = 1.f;
  float high_freq_factor = 4.f;
  int original_max_position = 8192;
  // yarn only (transformers' _compute_yarn_parameters; DeepSeek-V3 folds
  // get_mscale(factor, mscale_all_dim)^2 into the softmax scale).
  float beta_fast = 32.f;
  float beta_slow = 1.f;
  float mscale = 0.f;          // 0: absent
  float mscale_all_dim = 0.f;  // 0: absent
  bool truncate = true;        // round the correction range outwards
};

// Multi-head Latent Attention (DeepSeek-V2/V3). Per token and layer the KV
// cache holds kv_lora_rank + qk_rope_head_dim values (the normed latent and
// the rotated shared RoPE key), not per-head K and V.
struct MlaConfig {
  int q_lora_rank = 0;  // 0: a plain q_proj (DeepSeek-V2-Lite, Moonlight)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Width of one latent cache slot.
  int latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

// Mixture of experts (DeepSeek-V2/V3 routing).
//  scores = softmax or sigmoid(x · router_wᵀ) in f32;
//  choice = scores + e_score_correction_bias (noaux_tc only; the bias chooses
//  experts but never weights them); group_limited: keep the topk_group groups
//  with the best group score (sum of the group's top 2 for noaux_tc, max for
//  group_limited_greedy), then the top_k experts among them;
//  weights = scores of the chosen, / their sum if norm_topk_prob, ·
//  routed_scaling_factor.
struct MoeConfig {
  int n_routed_experts = 0;  // 0: dense model
  int n_shared_experts = 0;
  int top_k = 0;             // num_experts_per_tok
  int expert_ffn_dim = 0;    // moe_intermediate_size (shared expert: · n_shared_experts)
  int first_k_dense = 0;     // first_k_dense_replace: layers below are dense MLPs
  int layer_freq = 1;        // moe_layer_freq
  std::string scoring = "softmax";      // "softmax" | "sigmoid"
  std::string topk_method = "greedy";   // "greedy" | "group_limited_greedy" | "noaux_tc"
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.f;
  bool IsMoeLayer(int layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense && layer % layer_freq == 0;
  }
};

struct ModelConfig {
  std::string arch;  // "llama", "mistral", "qwen2", "qwen3", "deepseek_v2", "deepseek_v3"
  int n_layers = 0;
  int hidden_dim = 0;  // model width (HF hidden_size)
  int ffn_dim = 0;     // HF intermediate_size
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;    // usually hidden_dim / n_heads (Qwen3 may differ)
  int vocab_size = 0;
  int max_seq_len = 0; // max_position_embeddings
  // Multi-token-prediction layers stored after the n_layers decoder layers
  // (DeepSeek-V3 num_nextn_predict_layers, GGUF nextn_predict_layers): in
  // the file, not run.
  int n_mtp_layers = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  RopeStyle rope_style = RopeStyle::kHalf;
  RopeScaling rope_scaling;
  bool tie_embeddings = false;
  bool qkv_bias = false;  // Qwen2/2.5
  bool qk_norm = false;   // Qwen3: RMSNorm over each head of q and k before RoPE
  int bos_id = -1;
  std::vector<int> eos_ids;

  // DeepSeek-V2/V3 family only (arch deepseek_v2 / deepseek_v3): n_kv_heads ==
  // n_heads and head_dim == mla.qk_rope_head_dim (the rotated part);
  // ffn_dim is the dense layers' intermediate size.
  MlaConfig mla;
  MoeConfig moe;
  // Checkpoint tensor names start with this (Kimi-K2.5's "language_model.");
  // tensors without it (a vision tower) are skipped.
  std::string tensor_prefix;
  bool IsMla() const { return mla.kv_lora_rank > 0; }

  // EAGLE-3 draft heads only (architectures: ["LlamaForCausalLMEagle3"],
  // arch "llama_eagle3"): n_layers is 1 (the midlayer).
  int draft_vocab_size = 0;     // 0: same as vocab_size
  int target_hidden_size = 0;   // 0: same as hidden_dim
  std::vector<int> eagle_aux_layer_ids;  // eagle_config.eagle_aux_hidden_state_layer_ids

  // Rejects absurd values (zero or negative sizes, heads that don't divide,
  // vocab over 2^24, eps <= 0 ...), naming the key, the value and what was
  // expected. `source` (a file name) prefixes the message.
  Status Validate(const std::string& source) const;

 private:
  Status ValidateMlaMoe(const std::string& source) const;
};

// llama3 RoPE scaling as per-pair frequency divisors, as llama.cpp's
// converter stores them in rope_freqs.weight: pair i (dims 2i, 2i+1 or
// i, i + head_dim/2) rotates with theta^(-2i/head_dim) / factors[i].
// Returns head_dim / 2 values. REQUIRES: s.type == "llama3", head_dim even.
std::vector<float> Llama3RopeFreqFactors(int head_dim, float rope_theta, const RopeScaling& s);

// Parses a Hugging Face config.json (text). Supports LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// LlamaForCausalLMEagle3 (draft heads), DeepseekV2ForCausalLM,
// DeepseekV3ForCausalLM (Kimi-K2, Moonlight) and
// KimiK25ForConditionalGeneration (its text_config).
StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source);

}  // namespace specd
