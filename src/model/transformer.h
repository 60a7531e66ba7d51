// The Llama-family forward pass (Llama 2/3, Mistral, Qwen2/2.5 with q/k/v
// biases, Qwen3 with q/k norms); see model/model.h for the contract.
//
// Per layer (x: residual stream (T, hidden), xn: its normed copy):
//   q,k,v = xn·Wqᵀ, xn·Wkᵀ, xn·Wvᵀ (+bias) → [q/k norm] → RoPE → KV cache
//   a = attention(q, cache) (T, n_q_heads·head_dim);   o = a·Woᵀ (partial sum)
//   x += allreduce(o); xn = rmsnorm(x)·ffn_norm          (one fused collective)
//   d = (silu(xn·Wgᵀ) ⊙ xn·Wuᵀ)·Wdᵀ (partial sum)
//   x += allreduce(d); xn = rmsnorm(x)·next_norm        (next layer's or final)
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "model/weight_binding.h"

namespace specd {

class Transformer : public Model {
 public:
  // Binds this rank's shard of `ckpt`'s weights (zero-copy where possible).
  // `ckpt`, `comm` and `pool` must outlive the Transformer.
  static StatusOr<std::unique_ptr<Transformer>> Create(const Checkpoint& ckpt,
                                                       const ShardPlan& plan, Communicator* comm,
                                                       kernels::ThreadPool* pool,
                                                       const TransformerOptions& options = {});

  // Width of one KV cache slot on this rank: n_kv_heads_local · head_dim.
  int kv_dim_local() const { return plan_.n_kv_heads * config_.head_dim; }
  int kv_k_dim() const override { return kv_dim_local(); }
  int kv_v_dim() const override { return kv_dim_local(); }

  Status Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out) override;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;  // (hidden) / (head_dim)
    Linear wq, wk, wv, wo, w_gate, w_up, w_down;
  };
  Transformer() = default;
  Status Bind(const Checkpoint& ckpt);

  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  std::vector<float> rope_angles_;  // this forward's (kernels::RopeAngles)
  std::vector<float> q_, k_, v_, att_, o_, gate_, up_;
};

}  // namespace specd
