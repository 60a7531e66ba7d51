#include "model/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "model/rope.h"

namespace specd {
namespace {

void AddBias(const std::vector<float>& bias, int n_tokens, float* y) {
  if (bias.empty()) return;
  size_t n = bias.size();
  for (int t = 0; t < n_tokens; ++t)
    for (size_t i = 0; i < n; ++i) y[t * n + i] += bias[i];
}

}  // namespace

StatusOr<std::unique_ptr<Transformer>> Transformer::Create(const Checkpoint& ckpt,
                                                           const ShardPlan& plan,
                                                           Communicator* comm,
                                                           kernels::ThreadPool* pool,
                                                           const TransformerOptions& options) {
  std::unique_ptr<Transformer> t(new Transformer());
  t->config_ = ckpt.config();
  t->plan_ = plan;
  t->options_ = options;
  t->comm_ = comm;
  t->pool_ = pool;
  RETURN_IF_ERROR(t->Bind(ckpt));
  t->inv_freq_ = RopeInvFreq(t->config_);
  return t;
}

Status Transformer::Bind(const Checkpoint& ck) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_dim, hd = c.head_dim;
  const int64_t q_full = int64_t{c.n_heads} * hd, kv_full = int64_t{c.n_kv_heads} * hd;
  RETURN_IF_ERROR(BindCommon(ck));

  layers_.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    Layer& L = layers_[l];
    RETURN_IF_ERROR(ReadVector(ck, LayerName(l, "input_layernorm.weight"), H, 0, H, &L.attn_norm));
    RETURN_IF_ERROR(
        ReadVector(ck, LayerName(l, "post_attention_layernorm.weight"), H, 0, H, &L.ffn_norm));
    if (c.qk_norm) {
      RETURN_IF_ERROR(ReadVector(ck, LayerName(l, "self_attn.q_norm.weight"), hd, 0, hd, &L.q_norm));
      RETURN_IF_ERROR(ReadVector(ck, LayerName(l, "self_attn.k_norm.weight"), hd, 0, hd, &L.k_norm));
    }
    int64_t q0 = int64_t{plan_.q_head_begin} * hd, qn = int64_t{plan_.n_q_heads} * hd;
    int64_t k0 = int64_t{plan_.kv_head_begin} * hd, kn = int64_t{plan_.n_kv_heads} * hd;
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "self_attn.q_proj.weight"), q_full, H, q0, qn, 0, H, &L.wq));
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "self_attn.k_proj.weight"), kv_full, H, k0, kn, 0, H, &L.wk));
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "self_attn.v_proj.weight"), kv_full, H, k0, kn, 0, H, &L.wv));
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "self_attn.o_proj.weight"), H, q_full, 0, H, q0, qn, &L.wo));
    int64_t f0 = plan_.ffn_begin, fn = plan_.ffn_len;
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "mlp.gate_proj.weight"), c.ffn_dim, H, f0, fn, 0, H, &L.w_gate));
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "mlp.up_proj.weight"), c.ffn_dim, H, f0, fn, 0, H, &L.w_up));
    RETURN_IF_ERROR(BindLinear(ck, LayerName(l, "mlp.down_proj.weight"), H, c.ffn_dim, 0, H, f0, fn, &L.w_down));
    for (const Linear* lin : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      weight_bytes_ += lin->w.nbytes;
  }
  return Status::Ok();
}

Status Transformer::Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out) {
  const ModelConfig& c = config_;
  const int H = c.hidden_dim, hd = c.head_dim;
  const int nq = plan_.n_q_heads, nkv = plan_.n_kv_heads;
  const int qd = nq * hd, kvd = nkv * hd, fd = plan_.ffn_len;

  ASSIGN_OR_RETURN(BatchLayout layout, LayoutBatch(batch, kv));
  const int T = layout.T;
  const std::vector<int>& offset = layout.offset;
  const std::vector<int>& length = layout.length;
  Embed(batch, layout);
  float* x = x_.data();
  float* xn = xn_.data();
  const int32_t* pos = pos_.data();
  float* q = Grow(q_, size_t(T) * qd);
  float* k = Grow(k_, size_t(T) * kvd);
  float* v = Grow(v_, size_t(T) * kvd);
  float* att = Grow(att_, size_t(T) * qd);
  float* o = Grow(o_, size_t(T) * H);
  float* gate = Grow(gate_, size_t(T) * fd);
  float* up = Grow(up_, size_t(T) * fd);
  OpProfile* prof = profile_;

  if (!capture_.empty()) out->aux_hidden.assign(size_t(T) * capture_.size() * H, 0.f);

  const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
  {
    OpTimer timer(prof, ProfOp::kRope);
    kernels::RopeAngles(pos, T, inv_freq_.data(), hd, &rope_angles_);
  }
  {
    OpTimer timer(prof, ProfOp::kNorm);
    kernels::RmsNorm(x, layers_[0].attn_norm.data(), T, H, c.norm_eps, xn);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    Layer& L = layers_[l];
    Capture(l, T, out);
    {
      OpTimer timer(prof, ProfOp::kMatQkv);
      kernels::MatMul(L.wq.w, xn, T, q, pool_);
      kernels::MatMul(L.wk.w, xn, T, k, pool_);
      kernels::MatMul(L.wv.w, xn, T, v, pool_);
      AddBias(L.wq.bias, T, q);
      AddBias(L.wk.bias, T, k);
      AddBias(L.wv.bias, T, v);
    }
    if (c.qk_norm) {
      OpTimer timer(prof, ProfOp::kNorm);
      kernels::RmsNorm(q, L.q_norm.data(), T * nq, hd, c.norm_eps, q);
      kernels::RmsNorm(k, L.k_norm.data(), T * nkv, hd, c.norm_eps, k);
    }
    {
      OpTimer timer(prof, ProfOp::kRope);
      kernels::RopeWithAngles(q, T, nq, hd, rope_angles_.data(), interleaved);
      kernels::RopeWithAngles(k, T, nkv, hd, rope_angles_.data(), interleaved);
    }
    for (size_t s = 0; s < batch.size(); ++s) {
      OpTimer timer(prof, ProfOp::kAttention);
      const SeqInput& in = batch[s];
      int n = static_cast<int>(in.tokens.size());
      for (int i = 0; i < n; ++i) {
        int t = offset[s] + i;
        std::memcpy(kv->K(l, in.seq, length[s] + i), k + size_t(t) * kvd, sizeof(float) * kvd);
        std::memcpy(kv->V(l, in.seq, length[s] + i), v + size_t(t) * kvd, sizeof(float) * kvd);
      }
      kernels::Attention(q + size_t(offset[s]) * qd, n, length[s] + n, kv->Pages(l, in.seq),
                         in.tree_mask.empty() ? nullptr : in.tree_mask.data(), nq, nkv, hd,
                         att + size_t(offset[s]) * qd, pool_);
    }
    {
      OpTimer timer(prof, ProfOp::kMatO);
      kernels::MatMul(L.wo.w, att, T, o, pool_);
    }
    {
      OpTimer timer(prof, ProfOp::kAllReduce);
      RETURN_IF_ERROR(NormAndAllReduce(o, L.ffn_norm.data(), T)
                          .WithStage(fmt::format("layer {} attention allreduce", l)));
    }
    {
      OpTimer timer(prof, ProfOp::kMatGateUp);
      kernels::MatMul(L.w_gate.w, xn, T, gate, pool_);
      kernels::MatMul(L.w_up.w, xn, T, up, pool_);
    }
    {
      OpTimer timer(prof, ProfOp::kSwiGlu);
      kernels::SwiGLU(gate, up, int64_t{T} * fd, gate);
    }
    {
      OpTimer timer(prof, ProfOp::kMatDown);
      kernels::MatMul(L.w_down.w, gate, T, o, pool_);
    }
    const float* next_norm =
        l + 1 < c.n_layers ? layers_[l + 1].attn_norm.data() : final_norm_.data();
    OpTimer timer(prof, ProfOp::kAllReduce);
    RETURN_IF_ERROR(
        NormAndAllReduce(o, next_norm, T).WithStage(fmt::format("layer {} mlp allreduce", l)));
  }
  Capture(c.n_layers, T, out);
  return Finish(batch, layout, kv, out);
}

}  // namespace specd
