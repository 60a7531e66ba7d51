// ModelConfig: one description of a Llama-family model, filled from a Hugging
// Face config.json or from GGUF metadata, and validated in one place.
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
  std::string type;  // "" (none), "llama3", "linear"
  float factor = 1.f;
  float low_freq_factor = 1.f;
  float high_freq_factor = 4.f;
  int original_max_position = 8192;
};

struct ModelConfig {
  std::string arch;  // "llama", "mistral", "qwen2", "qwen3"
  int n_layers = 0;
  int hidden_dim = 0;  // model width (HF hidden_size)
  int ffn_dim = 0;     // HF intermediate_size
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;    // usually hidden_dim / n_heads (Qwen3 may differ)
  int vocab_size = 0;
  int max_seq_len = 0; // max_position_embeddings
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  RopeStyle rope_style = RopeStyle::kHalf;
  RopeScaling rope_scaling;
  bool tie_embeddings = false;
  bool qkv_bias = false;  // Qwen2/2.5
  bool qk_norm = false;   // Qwen3: RMSNorm over each head of q and k before RoPE
  int bos_id = -1;
  std::vector<int> eos_ids;

  // EAGLE-3 draft heads only (architectures: ["LlamaForCausalLMEagle3"],
  // arch "llama_eagle3"): n_layers is 1 (the midlayer).
  int draft_vocab_size = 0;     // 0: same as vocab_size
  int target_hidden_size = 0;   // 0: same as hidden_dim
  std::vector<int> eagle_aux_layer_ids;  // eagle_config.eagle_aux_hidden_state_layer_ids

  // Rejects absurd values (zero or negative sizes, heads that don't divide,
  // vocab over 2^24, eps <= 0 ...), naming the key, the value and what was
  // expected. `source` (a file name) prefixes the message.
  Status Validate(const std::string& source) const;
};

// llama3 RoPE scaling as per-pair frequency divisors, as llama.cpp's
// converter stores them in rope_freqs.weight: pair i (dims 2i, 2i+1 or
// i, i + head_dim/2) rotates with theta^(-2i/head_dim) / factors[i].
// Returns head_dim / 2 values. REQUIRES: s.type == "llama3", head_dim even.
std::vector<float> Llama3RopeFreqFactors(int head_dim, float rope_theta, const RopeScaling& s);

// Parses a Hugging Face config.json (text). Supports LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and
// LlamaForCausalLMEagle3 (draft heads).
StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text, const std::string& source);

}  // namespace specd
