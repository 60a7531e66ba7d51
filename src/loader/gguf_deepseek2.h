// llama.cpp's `deepseek2` GGUF architecture (DeepSeek-V2/V3, Kimi-K2,
// Moonlight) read into the ModelConfig and Hugging Face-named tensors that
// the safetensors path gives (loader/weight_names.h, ExpectedTensors).
//
// Metadata, as llama.cpp b11312's convert_hf_to_gguf.py (DeepseekV2Model)
// writes it and src/models/deepseek2.cpp reads it ("deepseek2." omitted):
//   block_count (- nextn_predict_layers)  n_layers
//   embedding_length, feed_forward_length, context_length, vocab_size
//   attention.head_count                  n_heads (n_kv_heads = n_heads)
//   attention.layer_norm_rms_epsilon      norm_eps
//   attention.q_lora_rank                 mla.q_lora_rank (absent: 0, a plain q_proj)
//   attention.kv_lora_rank                mla.kv_lora_rank
//   rope.dimension_count                  mla.qk_rope_head_dim (= head_dim)
//   attention.key_length_mla              qk_nope + qk_rope     } current files; then
//   attention.value_length_mla            v_head_dim            } key_length = kv_lora_rank +
//     qk_rope, value_length = kv_lora_rank, head_count_kv = 1 (MLA as MQA)
//   attention.key_length / value_length   qk_nope + qk_rope / v_head_dim in legacy files
//                                         (no *_mla keys; head_count_kv = n_heads)
//   expert_count, expert_used_count, expert_shared_count, expert_feed_forward_length,
//   leading_dense_block_count             moe.n_routed_experts, top_k, n_shared_experts,
//                                         expert_ffn_dim, first_k_dense (layer_freq 1)
//   expert_gating_func                    1 softmax (also when absent) -> arch deepseek_v2,
//                                         topk_method greedy, or group_limited_greedy with
//                                         groups; 2 sigmoid -> deepseek_v3, noaux_tc
//   expert_group_count / _used_count      moe.n_group / topk_group (absent or 0: 1)
//   expert_weights_scale                  routed_scaling_factor (absent or 0: 1)
//   expert_weights_norm                   norm_topk_prob (absent: false)
//   rope.freq_base; rope.scaling.type     "none" | "linear" | "yarn" with
//     .factor, .original_context_length, .yarn_beta_fast/slow (absent: 32 / 1) and
//     .yarn_log_multiplier = 0.1 * mscale_all_dim; llama.cpp assumes mscale =
//     mscale_all_dim when that is not 1, else 1, and so does this reader.
// RoPE rotates adjacent pairs (RopeStyle::kInterleaved): q and kv_a rows are
// stored as in the HF checkpoint.
//
// Tensors (ggml ne, innermost first -> PyTorch shape, outermost first):
//   token_embd, output_norm, output (absent: tied), blk.L.attn_norm, ffn_norm,
//   attn_q | attn_q_a + attn_q_a_norm + attn_q_b, attn_kv_a_mqa, attn_kv_a_norm,
//   attn_output, ffn_{gate,up,down} (dense layers), ffn_gate_inp (router),
//   exp_probs_b.bias (e_score_correction_bias), ffn_{gate,up,down}_shexp
//     -> one HF tensor each, zero-copy.
//   ffn_{gate,up,down}_exps [cols, rows, n_expert] -> mlp.experts.E.*_proj.weight
//     (rows, cols): zero-copy views, expert E's rows are one contiguous slice.
//   ffn_gate_up_exps [hidden, 2 * ff, n_expert] (--fuse-gate-up-exps) -> gate_proj
//     = rows [0, ff), up_proj = rows [ff, 2 ff) of each expert's slice.
//   attn_kv_b [kv_lora_rank, n_heads * (qk_nope + v)] (legacy files) -> kv_b_proj.
//   attn_k_b [qk_nope, kv_lora_rank, n_heads] + attn_v_b [kv_lora_rank, v_head_dim,
//     n_heads] (current files: per head k_b = W_UKᵀ, v_b = W_UV) -> kv_b_proj
//     (n_heads * (qk_nope + v), kv_lora_rank), rebuilt at load in memory the
//     checkpoint owns: head h's rows are [W_UK_h (qk_nope rows); W_UV_h (v rows)].
//     Same dtype as k_b/v_b when both are the same float type (exact); F32 when
//     either is quantized (every Q8_0/Q4_0 value is exact in F32).
// Tensors of layers >= n_layers (MTP / nextn blocks) and tensors this map does
// not know keep their GGUF names.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "loader/checkpoint_internal.h"
#include "loader/gguf_reader.h"

namespace specd {

inline constexpr const char* kDeepseek2Arch = "deepseek2";

// The one-to-one names of the table above ("blk.3.attn_kv_a_mqa.weight" <->
// "model.layers.3.self_attn.kv_a_proj_with_mqa.weight"); "" for names outside
// it (the 3-D expert tensors, attn_k_b / attn_v_b, unknown names).
std::string Deepseek2GgufToHfName(const std::string& gguf_name);
std::string Deepseek2HfToGgufName(const std::string& hf_name);

// Metadata -> ModelConfig (arch deepseek_v2 or deepseek_v3, validated).
// Missing required keys, wrong types and values that contradict each other
// are errors naming the file, the key, expected and found.
StatusOr<ModelConfig> Deepseek2ConfigFromGguf(const GgufFile& f, const GgufVocab& vocab);

// Fills `ck`'s config and tensors from a parsed deepseek2 file whose bytes
// start at `file_data`. Every tensor the config implies must be present with
// its shape (errors name the GGUF tensor, expected and found ne); a 3-D
// expert tensor whose last dimension is not expert_count is Corruption.
Status LoadDeepseek2Gguf(const GgufFile& f, const uint8_t* file_data, CheckpointBuilder* ck);

}  // namespace specd
