// DeepSeek-V2/V3 (Kimi-K2, Moonlight) models -> llama.cpp's `deepseek2` GGUF,
// as llama.cpp b11312's convert_hf_to_gguf.py (DeepseekV2Model) writes it,
// so that llama.cpp loads the file; loader/gguf_deepseek2.h reads it back
// into the same ModelConfig and HF tensors.
//
// Metadata: the keys listed in loader/gguf_deepseek2.h, in the current (MLA)
// layout: head_count_kv 1, key_length = kv_lora_rank + qk_rope, value_length
// = kv_lora_rank, key_length_mla = qk_nope + qk_rope, value_length_mla =
// v_head_dim. Differences from the converter, each so llama.cpp reads the
// model the config describes:
//   - attention.q_lora_rank = 0 is written for a plain q_proj (the converter
//     omits it, and llama.cpp b11312 then refuses any such model whose
//     layer count is not DeepSeek-V2-Lite's 26/27);
//   - expert_group_count / _used_count are 1 for topk_method "greedy"
//     (llama.cpp limits groups whenever expert_group_count > 1);
//   - expert_weights_scale, expert_group_* and expert_gating_func are always
//     written (the converter skips keys config.json lacks; values equal);
//   - output.weight is always written, for a tied config as a copy of
//     token_embd (the converter omits it; a deepseek2 head is never tied, and
//     loader/gguf_deepseek2.h refuses a file without it).
// YaRN: rope.scaling.{type,factor,original_context_length,yarn_beta_fast,
// yarn_beta_slow} and yarn_log_multiplier = 0.1 * mscale_all_dim. llama.cpp
// assumes mscale = mscale_all_dim unless that is 1 (then mscale = 1): another
// mscale is logged as a warning, as the converter drops it too.
//
// Tensors: the HF weights (shape (out, in)), renamed, with
//   kv_b_proj (n_heads * (qk_nope + v), kv_lora_rank) split per head into
//     attn_k_b (n_heads, kv_lora_rank, qk_nope) = W_UKᵀ and attn_v_b
//     (n_heads, v_head_dim, kv_lora_rank) = W_UV;
//   mlp.experts.E.{gate,up,down}_proj stacked into ffn_{gate,up,down}_exps
//     (n_experts, rows, cols).
// Types: 1-D tensors (norms, e_score_correction_bias) and the router
// ffn_gate_inp stay F32; every other matrix is options.dtype, except that a
// Q8_0/Q4_0 matrix whose rows are not a multiple of 32 is written F16 (as the
// converter falls back). Q4_0 is what llama-quantize --pure writes.
//
// Unsupported (an error naming the setting): moe_layer_freq != 1, RopeStyle
// kHalf (rope_interleave false: llama.cpp always rotates adjacent pairs).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "loader/model_config.h"
#include "modelgen/model_writer.h"

namespace specd {

// REQUIRES: c.IsMla(). `weights` by HF name, with or without c.tensor_prefix;
// every tensor ExpectedTensors(c) lists must be there with its shape.
Status WriteDeepseek2Gguf(const ModelConfig& c, const std::vector<WeightSource>& weights,
                          const GgufModelOptions& options, const std::string& path);

}  // namespace specd
