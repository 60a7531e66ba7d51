// How one rank's share of a model is cut for tensor parallelism.
//
// Sharding rule (Megatron style, as in gpt-fast's tp.py):
//  - q/k/v and gate/up are column-parallel: a rank holds a contiguous range of
//    output rows (whole heads for q/k/v, a range of FFN units for gate/up), so
//    its slice of the stored weight is a zero-copy row range.
//  - o and down are row-parallel: a rank holds the matching range of input
//    columns (a copy, sliced on block boundaries for quantized weights:
//    32 elements, 256 for the K-quants and IQ4_XS),
//    and the partial outputs are summed by an allreduce.
//  - Query heads are split evenly. KV heads are split when n_kv_heads divides
//    by the world size; when the world size divides by n_kv_heads, each KV head
//    is replicated on world/n_kv_heads ranks (as SGLang and vLLM do).
//  - The LM head is vocab-parallel when vocab_size divides by the world size
//    (logits are gathered), else replicated. Embeddings are replicated.
//  - Multi-head Latent Attention: query heads are split; the latent
//    projections (q_a, kv_a) are replicated, so every rank holds the whole
//    latent KV cache; kv_b rows and o_proj columns follow the local heads.
//  - MoE: every routed expert's and the shared experts' intermediate units are
//    split like a dense FFN (a range per rank); the router is replicated. With
//    expert parallelism (--ep) each rank instead holds a contiguous range of
//    whole routed experts (the shared experts stay split by units).
//    Attention and the MoE block then need one allreduce each per layer.
// At world size 1 the plan is the whole model.
#pragma once

#include <string>

#include "base/status.h"
#include "loader/model_config.h"

namespace specd {

struct ShardPlan {
  int rank = 0, world = 1;
  int q_head_begin = 0, n_q_heads = 0;    // local query heads
  int kv_head_begin = 0, n_kv_heads = 0;  // local KV heads
  int ffn_begin = 0, ffn_len = 0;         // local FFN units (dense layers)
  int expert_ffn_begin = 0, expert_ffn_len = 0;  // local units of each routed expert
  int expert_begin = 0, n_local_experts = 0;     // routed experts held on this rank
  int shared_ffn_begin = 0, shared_ffn_len = 0;  // local units of the shared experts
  bool vocab_parallel = false;
  int vocab_begin = 0, vocab_len = 0;     // local LM-head rows

  // Explains which dimension does not divide when no valid plan exists.
  // `quantized` requires row-parallel input slices on `quant_block`-element
  // boundaries (the largest block of the model's weight dtypes).
  // `expert_parallel`: whole routed experts per rank (MoE models only).
  static StatusOr<ShardPlan> Create(const ModelConfig& c, int rank, int world, bool quantized,
                                    bool expert_parallel = false, int quant_block = 32);
  std::string ToString() const;
};

}  // namespace specd
