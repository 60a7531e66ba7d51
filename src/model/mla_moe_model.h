// The DeepSeek-V2/V3 family (DeepSeek-V2-Lite, DeepSeek-V3, Kimi-K2/K2.5,
// Moonlight): Multi-head Latent Attention with a latent KV cache and a
// mixture of experts; see model/model.h for the contract.
//
// Per layer (x: residual (T, hidden), xn: normed; R = kv_lora_rank,
// dr = qk_rope_head_dim, dn = qk_nope_head_dim, dv = v_head_dim, h a local head):
//   q     = [q_a_layernorm(xn·Wq_aᵀ)]·Wq_bᵀ  or  xn·Wqᵀ        (T, heads, dn + dr)
//   c, kr = split(xn·Wkv_aᵀ, [R, dr]); c = kv_a_layernorm(c); kr = RoPE(kr)
//   cache slot ← [c, kr]                                        (R + dr floats)
//   absorbed attention: with Wkv_b's rows for h split into W_UK (dn, R) and
//   W_UV (dv, R), score(t, s) = (W_UKᵀ q_nope)·c_s + q_rope·kr_s, so each
//   head attends over the shared latent rows as one MQA head of width R + dr:
//     q̃_h = [W_UKᵀ q_nope_h, RoPE(q_rope_h)],  ã_h = Σ_s p_s [c_s, kr_s],
//     a_h = W_UV · ã_h[:R]                                       (dv)
//   x += allreduce(a·Woᵀ); xn = rmsnorm(x)
//   FFN: dense (layers < first_k_dense) or MoE: route(xn) → top_k experts;
//   y = Σ_k w_k · expert_k(xn) + shared(xn);  x += allreduce(y)
// The MoE pass groups the step's tokens by expert, so each chosen expert's
// weights are read once per step (prefill or verify), not once per token.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "model/model.h"
#include "model/weight_binding.h"

namespace specd {

// What the MoE layers of the last Forward read.
struct MoeStepStats {
  int tokens = 0;              // tokens in the step
  int64_t expert_reads = 0;    // distinct (layer, expert) pairs run
  int64_t expert_tokens = 0;   // (layer, token, expert) assignments
};

class MlaMoeModel : public Model {
 public:
  static StatusOr<std::unique_ptr<MlaMoeModel>> Create(const Checkpoint& ckpt,
                                                       const ShardPlan& plan, Communicator* comm,
                                                       kernels::ThreadPool* pool,
                                                       const TransformerOptions& options = {});

  // One latent row per slot, shared by keys and values.
  int kv_k_dim() const override { return config_.mla.latent_dim(); }
  int kv_v_dim() const override { return 0; }

  Status Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out) override;

  const MoeStepStats& last_moe_stats() const { return moe_stats_; }
  StepReads LastStepReads() const override;
  // Bytes of one routed expert on this rank (gate + up + down).
  size_t expert_bytes() const { return expert_bytes_; }

 private:
  struct Mlp {
    Linear gate, up, down;
  };
  struct Layer {
    std::vector<float> attn_norm, ffn_norm, q_a_norm, kv_a_norm;
    Linear q_a, q_b, q;  // q_a + q_b with a q LoRA, else q
    Linear kv_a;         // (R + dr, hidden), replicated
    Linear kv_b;         // (local heads · (dn + dv), R)
    std::vector<uint8_t> uk_t_data;
    std::vector<TensorView> uk_t;  // per local head: W_UKᵀ (R, dn)
    std::vector<TensorView> uv;    // per local head: W_UV (dv, R), rows of kv_b
    Linear o;                      // (hidden, local heads · dv)
    bool moe = false;
    Mlp dense;                     // dense FFN, or the shared experts (MoE layers)
    bool has_shared = false;
    std::vector<float> router_data;  // (E, hidden) f32
    TensorView router;
    std::vector<float> router_bias;  // (E) or empty
    std::vector<Mlp> experts;
  };
  MlaMoeModel() = default;
  Status Bind(const Checkpoint& ck);
  Status BindLayer(const Checkpoint& ck, int l, Layer* L);
  void Attention(const Layer& L, int l, const std::vector<SeqInput>& batch,
                 const BatchLayout& layout, KvCache* kv, float* att);
  // y (T, hidden) = the FFN of xn_ (dense or MoE), a partial sum under TP.
  void Ffn(const Layer& L, int T, float* y);
  void RunMlp(const Mlp& m, const float* x, int n, int units, float* y);
  // fn(h) for every local head, heads split over the pool's threads.
  void ForEachHead(int n_heads, const std::function<void(int)>& fn);

  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  std::vector<float> rope_angles_;  // this forward's (kernels::RopeAngles)
  float q_scale_ = 1.f;     // folds the softmax scale into q̃ (the kernel scales by 1/sqrt(R + dr))
  float rope_scale2_ = 1.f; // YaRN attention factor², applied to q̃'s RoPE part
  size_t expert_bytes_ = 0;
  int n_moe_layers_ = 0;
  MoeStepStats moe_stats_;
  // Scratch (T-sized, grown).
  std::vector<float> qa_, q_, kva_, lat_, tmp_, qlat_, alat_, att_, o_, gate_, up_, logits_,
      weights_, ex_, ey_;
  std::vector<int32_t> ids_;
};

}  // namespace specd
