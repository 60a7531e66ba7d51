// Weight names and shapes of the Llama and DeepSeek-V2/V3 families, and the
// name map between llama.cpp (GGUF) and Hugging Face names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loader/model_config.h"

namespace specd {

struct TensorSpec {
  std::string name;              // HF name
  std::vector<int64_t> shape;    // PyTorch order (out, in)
  bool is_norm_or_bias = false;  // 1-D: kept F32 when quantizing
};

// Every tensor a Llama/Mistral/Qwen2/Qwen3 checkpoint holds, in file order:
// embedding, per layer (norms, q/k/v/o [+ biases, q/k norms], gate/up/down),
// final norm, then lm_head unless config.tie_embeddings. Shapes:
//   model.embed_tokens.weight            (vocab, hidden)
//   self_attn.q_proj.weight              (n_heads * head_dim, hidden)
//   self_attn.k_proj/v_proj.weight       (n_kv_heads * head_dim, hidden)
//   self_attn.o_proj.weight              (hidden, n_heads * head_dim)
//   self_attn.{q,k,v}_proj.bias          (out)              qwen2 only
//   self_attn.{q,k}_norm.weight          (head_dim)         qwen3 only
//   mlp.gate_proj/up_proj.weight         (ffn, hidden)
//   mlp.down_proj.weight                 (hidden, ffn)
//   *layernorm.weight, model.norm.weight (hidden)
//   lm_head.weight                       (vocab, hidden)
//
// DeepSeek-V2/V3 family (config.IsMla(): Kimi-K2, Moonlight), per layer L:
//   input_layernorm.weight                      (hidden)
//   self_attn.q_a_proj.weight                   (q_lora_rank, hidden)     q_lora_rank > 0
//   self_attn.q_a_layernorm.weight              (q_lora_rank)             q_lora_rank > 0
//   self_attn.q_b_proj.weight                   (n_heads * qk_head_dim, q_lora_rank)
//   self_attn.q_proj.weight                     (n_heads * qk_head_dim, hidden)  q_lora_rank == 0
//   self_attn.kv_a_proj_with_mqa.weight         (kv_lora_rank + qk_rope_head_dim, hidden)
//   self_attn.kv_a_layernorm.weight             (kv_lora_rank)
//   self_attn.kv_b_proj.weight                  (n_heads * (qk_nope_head_dim + v_head_dim),
//   kv_lora_rank) self_attn.o_proj.weight                     (hidden, n_heads * v_head_dim)
//   post_attention_layernorm.weight             (hidden)
//   dense layers (!moe.IsMoeLayer(L)): mlp.{gate,up,down}_proj as above
//   MoE layers:
//     mlp.gate.weight                           (n_routed_experts, hidden)  router
//     mlp.gate.e_score_correction_bias          (n_routed_experts)          noaux_tc only
//     mlp.experts.E.{gate,up}_proj.weight       (expert_ffn, hidden)        E < n_routed_experts
//     mlp.experts.E.down_proj.weight            (hidden, expert_ffn)
//     mlp.shared_experts.{gate,up}_proj.weight  (expert_ffn * n_shared, hidden)  n_shared > 0
//     mlp.shared_experts.down_proj.weight       (hidden, expert_ffn * n_shared)
// Every name starts with config.tensor_prefix (Kimi-K2.5's "language_model.").
// REQUIRES: arch is not llama_eagle3.
std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config);

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight",
// "token_embd.weight" -> "model.embed_tokens.weight", ...; names it does not
// know are returned unchanged.
std::string GgufToHfName(const std::string& gguf_name);
// The inverse; unknown names are returned unchanged.
std::string HfToGgufName(const std::string& hf_name);

// llama.cpp's q/k row permutation (convert_hf_to_gguf.py `permute`): within
// each of `n_head` heads of head_dim = rows / n_head rows, GGUF row
// 2*i + j holds HF row j * head_dim/2 + i (i < head_dim/2, j in {0,1}), so
// rotate_half pairs (i, i + head_dim/2) become adjacent pairs (2i, 2i+1).
// Returns the HF row stored at GGUF row `gguf_row`.
// REQUIRES: rows % n_head == 0 and head_dim even.
int64_t GgufRowToHfRow(int64_t gguf_row, int64_t rows, int n_head);

// True for q_proj/k_proj weights (and biases) that the GGUF `llama` layout
// stores permuted; `n_head` gets the head count to permute with. Always false
// for MLA configs (their q_proj is not permuted).
bool IsPermutedForGguf(const std::string& hf_name, const ModelConfig& config, int* n_head);

}  // namespace specd
