// Weight names and shapes of the Llama family, and the name map between
// llama.cpp (GGUF) and Hugging Face names.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loader/model_config.h"

namespace specd {

struct TensorSpec {
  std::string name;             // HF name
  std::vector<int64_t> shape;   // PyTorch order (out, in)
  bool is_norm_or_bias = false; // 1-D: kept F32 when quantizing
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
// stores permuted; `n_head` gets the head count to permute with.
bool IsPermutedForGguf(const std::string& hf_name, const ModelConfig& config, int* n_head);

}  // namespace specd
