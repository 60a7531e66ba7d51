// The Llama-family forward pass (Llama 2/3, Mistral, Qwen2/2.5 with q/k/v
// biases, Qwen3 with q/k norms) over a batch of sequences and a paged KV cache.
//
// Knows nothing of processes: tensor parallelism is the ShardPlan this rank's
// weights were cut with plus Communicator calls, which are no-ops at world 1.
// Every rank runs Forward with the same batch; the logits are complete on
// every rank (vocab-parallel LM heads are all-gathered).
//
// Per layer (x: residual stream (T, hidden), xn: its normed copy):
//   q,k,v = xn·Wqᵀ, xn·Wkᵀ, xn·Wvᵀ (+bias) → [q/k norm] → RoPE → KV cache
//   a = attention(q, cache) (T, n_q_heads·head_dim);   o = a·Woᵀ (partial sum)
//   x += allreduce(o); xn = rmsnorm(x)·ffn_norm          (one fused collective)
//   d = (silu(xn·Wgᵀ) ⊙ xn·Wuᵀ)·Wdᵀ (partial sum)
//   x += allreduce(d); xn = rmsnorm(x)·next_norm        (next layer's or final)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/op_profile.h"
#include "base/status.h"
#include "comm/communicator.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "loader/checkpoint.h"
#include "model/kv_cache.h"
#include "model/shard_plan.h"

namespace specd {

// One linear layer's local shard: y = x·Wᵀ + b.
struct Linear {
  TensorView w;                 // (out_local, in_local), points into the checkpoint or `owned`
  std::vector<uint8_t> owned;   // column slice copy for row-parallel layers
  std::vector<float> bias;      // (out_local) or empty
};

struct TransformerOptions {
  // Fuse the allreduce with the residual add and RMSNorm (one pass over the
  // data) instead of allreduce, then add, then norm.
  bool fuse_allreduce_norm = true;
};

// Per-sequence input of one forward step.
struct SeqInput {
  int seq = -1;                   // KV cache sequence id
  std::vector<int32_t> tokens;    // (n)
  std::vector<int32_t> pos;       // (n) RoPE positions; empty: length, length+1, ...
  std::vector<uint8_t> tree_mask; // (n, n) or empty for causal; see kernels::Attention
  bool all_logits = false;        // logits for every token, else only the last
};

struct ForwardOutput {
  // (n_rows, vocab): the last token of each sequence, or all of them when
  // all_logits; rows in sequence order. seq_row[i] = first row of sequence i.
  std::vector<float> logits;
  std::vector<int> seq_row;
  // (n_tokens_total, n_capture · hidden): the residual stream entering each
  // capture layer, concatenated in capture order (EAGLE-3's low/mid/high).
  std::vector<float> aux_hidden;
};

class Transformer {
 public:
  // Binds this rank's shard of `ckpt`'s weights (zero-copy where possible).
  // `ckpt`, `comm` and `pool` must outlive the Transformer.
  static StatusOr<std::unique_ptr<Transformer>> Create(const Checkpoint& ckpt,
                                                       const ShardPlan& plan, Communicator* comm,
                                                       kernels::ThreadPool* pool,
                                                       const TransformerOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ShardPlan& plan() const { return plan_; }
  // Width of one KV cache slot on this rank: n_kv_heads_local · head_dim.
  int kv_dim_local() const { return plan_.n_kv_heads * config_.head_dim; }
  // Bytes of weights one decode step reads on this rank.
  size_t weight_bytes() const { return weight_bytes_; }
  // The embedding table (vocab, hidden), e.g. for a draft head sharing it.
  const TensorView& embedding() const { return embed_; }

  // Layers whose input residual stream Forward copies into aux_hidden.
  void SetCaptureLayers(std::vector<int> layers) { capture_ = std::move(layers); }
  const std::vector<int>& capture_layers() const { return capture_; }

  // Per-op timers for --profile (null: off). Not owned; must outlive Forward calls.
  void SetProfile(OpProfile* profile) { profile_ = profile; }

  // Runs one step: appends each sequence's tokens to its KV cache (reserving
  // pages; ResourceExhausted if full, nothing appended) and computes logits.
  // REQUIRES: every seq live in `kv`; tokens < vocab_size (checked).
  Status Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out);

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;  // (hidden) / (head_dim)
    Linear wq, wk, wv, wo, w_gate, w_up, w_down;
  };
  Transformer() = default;
  Status Bind(const Checkpoint& ckpt);
  Status NormAndAllReduce(float* partial, const float* norm_w, int n_tokens);

  ModelConfig config_;
  ShardPlan plan_;
  TransformerOptions options_;
  Communicator* comm_ = nullptr;
  kernels::ThreadPool* pool_ = nullptr;
  TensorView embed_;    // (vocab, hidden), replicated
  TensorView lm_head_;  // (vocab, hidden); this rank uses rows of its plan
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  std::vector<int> capture_;
  size_t weight_bytes_ = 0;
  OpProfile* profile_ = nullptr;

  // Scratch, grown to the largest batch seen.
  std::vector<float> x_, xn_, q_, k_, v_, att_, o_, gate_, up_, logits_local_, gathered_;
  std::vector<int32_t> pos_;
};

}  // namespace specd
