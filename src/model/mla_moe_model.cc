#include "model/mla_moe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "kernels/ops.h"
#include "model/moe_router.h"
#include "model/rope.h"

namespace specd {
namespace {

// DeepSeek's q_a_layernorm and kv_a_layernorm use the RMSNorm default eps, not
// rms_norm_eps (transformers: DeepseekV3RMSNorm(q_lora_rank)).
constexpr float kLatentNormEps = 1e-6f;

TensorView MatrixView(DType dtype, const void* data, int64_t rows, int64_t cols) {
  TensorView v;
  v.dtype = dtype;
  v.shape = {rows, cols};
  v.data = data;
  v.nbytes = RowBytes(dtype, cols) * static_cast<size_t>(rows);
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<MlaMoeModel>> MlaMoeModel::Create(const Checkpoint& ckpt,
                                                           const ShardPlan& plan,
                                                           Communicator* comm,
                                                           kernels::ThreadPool* pool,
                                                           const TransformerOptions& options) {
  std::unique_ptr<MlaMoeModel> m(new MlaMoeModel());
  m->config_ = ckpt.config();
  m->plan_ = plan;
  m->options_ = options;
  m->comm_ = comm;
  m->pool_ = pool;
  const MlaConfig& mla = m->config_.mla;
  if (!m->config_.IsMla())
    return InvalidArgumentError(fmt::format("{}: not a Multi-head Latent Attention model", ckpt.path()));
  RETURN_IF_ERROR(m->Bind(ckpt));
  m->inv_freq_ = RopeInvFreq(m->config_);
  m->q_scale_ = static_cast<float>(MlaSoftmaxScale(m->config_) * std::sqrt(double(mla.latent_dim())));
  double af = RopeAttentionFactor(m->config_);
  m->rope_scale2_ = static_cast<float>(af * af);
  return m;
}

Status MlaMoeModel::Bind(const Checkpoint& ck) {
  RETURN_IF_ERROR(BindCommon(ck));
  layers_.resize(config_.n_layers);
  for (int l = 0; l < config_.n_layers; ++l) RETURN_IF_ERROR(BindLayer(ck, l, &layers_[l]));
  return Status::Ok();
}

Status MlaMoeModel::BindLayer(const Checkpoint& ck, int l, Layer* L) {
  const ModelConfig& c = config_;
  const MlaConfig& m = c.mla;
  const int64_t H = c.hidden_dim, R = m.kv_lora_rank, dr = m.qk_rope_head_dim,
                dn = m.qk_nope_head_dim, dv = m.v_head_dim, qkd = m.qk_head_dim();
  const int64_t nh = plan_.n_q_heads, h0 = plan_.q_head_begin, heads = c.n_heads;
  auto name = [&](const char* suffix) { return LayerName(l, suffix); };
  auto bytes = [](const Linear& lin) { return lin.w.nbytes; };

  RETURN_IF_ERROR(ReadVector(ck, name("input_layernorm.weight"), H, 0, H, &L->attn_norm));
  RETURN_IF_ERROR(ReadVector(ck, name("post_attention_layernorm.weight"), H, 0, H, &L->ffn_norm));
  if (m.q_lora_rank > 0) {
    const int64_t ql = m.q_lora_rank;
    RETURN_IF_ERROR(BindLinear(ck, name("self_attn.q_a_proj.weight"), ql, H, 0, ql, 0, H, &L->q_a));
    RETURN_IF_ERROR(ReadVector(ck, name("self_attn.q_a_layernorm.weight"), ql, 0, ql, &L->q_a_norm));
    RETURN_IF_ERROR(BindLinear(ck, name("self_attn.q_b_proj.weight"), heads * qkd, ql, h0 * qkd,
                               nh * qkd, 0, ql, &L->q_b));
    weight_bytes_ += bytes(L->q_a) + bytes(L->q_b);
  } else {
    RETURN_IF_ERROR(BindLinear(ck, name("self_attn.q_proj.weight"), heads * qkd, H, h0 * qkd,
                               nh * qkd, 0, H, &L->q));
    weight_bytes_ += bytes(L->q);
  }
  RETURN_IF_ERROR(
      BindLinear(ck, name("self_attn.kv_a_proj_with_mqa.weight"), R + dr, H, 0, R + dr, 0, H, &L->kv_a));
  RETURN_IF_ERROR(ReadVector(ck, name("self_attn.kv_a_layernorm.weight"), R, 0, R, &L->kv_a_norm));
  RETURN_IF_ERROR(BindLinear(ck, name("self_attn.kv_b_proj.weight"), heads * (dn + dv), R,
                             h0 * (dn + dv), nh * (dn + dv), 0, R, &L->kv_b));
  RETURN_IF_ERROR(BindLinear(ck, name("self_attn.o_proj.weight"), H, heads * dv, 0, H, h0 * dv,
                             nh * dv, &L->o));
  weight_bytes_ += bytes(L->kv_a) + bytes(L->kv_b) + bytes(L->o);

  // W_UKᵀ per head, transposed once at load: (R, dn) in kv_b's float dtype
  // (exact), f32 when kv_b is quantized.
  const TensorView& kvb = L->kv_b.w;
  const DType ukt_dtype = IsQuantized(kvb.dtype) ? DType::kF32 : kvb.dtype;
  const size_t ukt_row = RowBytes(ukt_dtype, dn);
  L->uk_t_data.resize(static_cast<size_t>(nh * R) * ukt_row);
  std::vector<float> uk(static_cast<size_t>(dn * R)), col(static_cast<size_t>(dn));
  for (int64_t h = 0; h < nh; ++h) {
    for (int64_t i = 0; i < dn; ++i)
      DequantizeRow(kvb.dtype, kvb.row(h * (dn + dv) + i), uk.data() + i * R, R);
    uint8_t* dst = L->uk_t_data.data() + static_cast<size_t>(h * R) * ukt_row;
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t i = 0; i < dn; ++i) col[i] = uk[i * R + r];
      QuantizeRow(ukt_dtype, col.data(), dst + r * ukt_row, dn);
    }
    L->uk_t.push_back(MatrixView(ukt_dtype, dst, R, dn));
    L->uv.push_back(MatrixView(kvb.dtype, kvb.row(h * (dn + dv) + dn), dv, R));
  }

  auto bind_mlp = [&](const std::string& prefix, int64_t units, int64_t begin, int64_t len,
                      Mlp* mlp) -> Status {
    RETURN_IF_ERROR(BindLinear(ck, prefix + "gate_proj.weight", units, H, begin, len, 0, H, &mlp->gate));
    RETURN_IF_ERROR(BindLinear(ck, prefix + "up_proj.weight", units, H, begin, len, 0, H, &mlp->up));
    return BindLinear(ck, prefix + "down_proj.weight", H, units, 0, H, begin, len, &mlp->down);
  };
  auto mlp_bytes = [&](const Mlp& mlp) { return bytes(mlp.gate) + bytes(mlp.up) + bytes(mlp.down); };
  L->moe = c.moe.IsMoeLayer(l);
  if (!L->moe) {
    RETURN_IF_ERROR(bind_mlp(name("mlp."), c.ffn_dim, plan_.ffn_begin, plan_.ffn_len, &L->dense));
    weight_bytes_ += mlp_bytes(L->dense);
    return Status::Ok();
  }
  const MoeConfig& e = c.moe;
  const int64_t E = e.n_routed_experts;
  ASSIGN_OR_RETURN(TensorView router, ck.Get(name("mlp.gate.weight"), {E, H}));
  if (IsQuantized(router.dtype))
    return UnsupportedError(fmt::format("{}: router {} is {}, expected a float dtype", ck.path(),
                                        router.name, DTypeName(router.dtype)));
  L->router_data.resize(static_cast<size_t>(E * H));
  for (int64_t r = 0; r < E; ++r) DequantizeRow(router.dtype, router.row(r), &L->router_data[r * H], H);
  L->router = MatrixView(DType::kF32, L->router_data.data(), E, H);
  if (e.topk_method == "noaux_tc")
    RETURN_IF_ERROR(ReadVector(ck, name("mlp.gate.e_score_correction_bias"), E, 0, E, &L->router_bias));
  L->experts.resize(E);  // only this rank's experts are bound (all but under --ep)
  for (int64_t x = plan_.expert_begin; x < plan_.expert_begin + plan_.n_local_experts; ++x) {
    RETURN_IF_ERROR(bind_mlp(fmt::format("model.layers.{}.mlp.experts.{}.", l, x), e.expert_ffn_dim,
                             plan_.expert_ffn_begin, plan_.expert_ffn_len, &L->experts[x]));
  }
  expert_bytes_ = mlp_bytes(L->experts[plan_.expert_begin]);
  ++n_moe_layers_;
  // A token's top_k experts, of which this rank holds n_local / E on average.
  weight_bytes_ += router.nbytes + static_cast<size_t>(e.top_k) * expert_bytes_ *
                                       plan_.n_local_experts / E;
  L->has_shared = e.n_shared_experts > 0;
  if (L->has_shared) {
    RETURN_IF_ERROR(bind_mlp(name("mlp.shared_experts."), int64_t{e.expert_ffn_dim} * e.n_shared_experts,
                             plan_.shared_ffn_begin, plan_.shared_ffn_len, &L->dense));
    weight_bytes_ += mlp_bytes(L->dense);
  }
  return Status::Ok();
}

void MlaMoeModel::ForEachHead(int n_heads, const std::function<void(int)>& fn) {
  if (pool_ == nullptr || pool_->size() == 1 || n_heads == 1) {
    for (int h = 0; h < n_heads; ++h) fn(h);
    return;
  }
  pool_->ParallelFor(n_heads, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) fn(static_cast<int>(h));
  });
}

void MlaMoeModel::Attention(const Layer& L, int l, const std::vector<SeqInput>& batch,
                            const BatchLayout& layout, KvCache* kv, float* att) {
  const MlaConfig& m = config_.mla;
  const int T = layout.T, nh = plan_.n_q_heads;
  const int R = m.kv_lora_rank, dr = m.qk_rope_head_dim, dn = m.qk_nope_head_dim,
            dv = m.v_head_dim, qkd = m.qk_head_dim(), W = m.latent_dim();
  const bool interleaved = config_.rope_style == RopeStyle::kInterleaved;
  const float* xn = xn_.data();
  OpProfile* prof = profile_;

  float* q = Grow(q_, size_t(T) * nh * qkd);
  float* kva = Grow(kva_, size_t(T) * W);
  {
    OpTimer timer(prof, ProfOp::kMatQkv);
    if (m.q_lora_rank > 0) {
      float* qa = Grow(qa_, size_t(T) * m.q_lora_rank);
      kernels::MatMul(L.q_a.w, xn, T, qa, pool_);
      kernels::RmsNorm(qa, L.q_a_norm.data(), T, m.q_lora_rank, kLatentNormEps, qa);
      kernels::MatMul(L.q_b.w, qa, T, q, pool_);
    } else {
      kernels::MatMul(L.q.w, xn, T, q, pool_);
    }
    kernels::MatMul(L.kv_a.w, xn, T, kva, pool_);
  }
  // Latent rows [kv_a_layernorm(c), RoPE(kr)] and the latent-space queries
  // q̃ (T, nh, W), pre-scaled so the kernel's 1/sqrt(W) gives the model's scale.
  float* lat = Grow(lat_, size_t(T) * W);
  float* qlat = Grow(qlat_, size_t(T) * nh * W);
  float* rot = Grow(tmp_, size_t(T) * nh * dr);
  {
    OpTimer timer(prof, ProfOp::kRope);
    for (int t = 0; t < T; ++t) {
      kernels::RmsNorm(kva + size_t(t) * W, L.kv_a_norm.data(), 1, R, kLatentNormEps,
                       lat + size_t(t) * W);
      std::memcpy(rot + size_t(t) * dr, kva + size_t(t) * W + R, sizeof(float) * dr);
    }
    kernels::RopeWithAngles(rot, T, 1, dr, rope_angles_.data(), interleaved);
    for (int t = 0; t < T; ++t)
      std::memcpy(lat + size_t(t) * W + R, rot + size_t(t) * dr, sizeof(float) * dr);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < nh; ++h)
        std::memcpy(rot + (size_t(t) * nh + h) * dr, q + (size_t(t) * nh + h) * qkd + dn,
                    sizeof(float) * dr);
    kernels::RopeWithAngles(rot, T, nh, dr, rope_angles_.data(), interleaved);
    const float s = q_scale_ * rope_scale2_;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < nh; ++h) {
        const float* src = rot + (size_t(t) * nh + h) * dr;
        float* dst = qlat + (size_t(t) * nh + h) * W + R;
        for (int i = 0; i < dr; ++i) dst[i] = src[i] * s;
      }
  }
  // Per-head matmuls are small: the pool splits heads, each head's matmul
  // runs on one thread.
  {
    OpTimer timer(prof, ProfOp::kMatQkv);
    ForEachHead(nh, [&](int h) {
      thread_local std::vector<float> qn, qa;
      qn.resize(size_t(T) * dn);
      qa.resize(size_t(T) * R);
      for (int t = 0; t < T; ++t)
        std::memcpy(&qn[size_t(t) * dn], q + (size_t(t) * nh + h) * qkd, sizeof(float) * dn);
      kernels::MatMul(L.uk_t[h], qn.data(), T, qa.data(), nullptr);  // (T, R)
      for (int t = 0; t < T; ++t) {
        float* dst = qlat + (size_t(t) * nh + h) * W;
        const float* src = &qa[size_t(t) * R];
        for (int i = 0; i < R; ++i) dst[i] = src[i] * q_scale_;
      }
    });
  }
  // One MQA head of width W per sequence over its latent cache (V aliases K).
  float* alat = Grow(alat_, size_t(T) * nh * W);  // (T, nh, W) attention outputs
  for (size_t s = 0; s < batch.size(); ++s) {
    OpTimer timer(prof, ProfOp::kAttention);
    const SeqInput& in = batch[s];
    const int n = static_cast<int>(in.tokens.size()), off = layout.offset[s];
    for (int i = 0; i < n; ++i)
      std::memcpy(kv->K(l, in.seq, layout.length[s] + i), lat + size_t(off + i) * W,
                  sizeof(float) * W);
    kernels::Attention(qlat + size_t(off) * nh * W, n, layout.length[s] + n, kv->Pages(l, in.seq),
                       in.tree_mask.empty() ? nullptr : in.tree_mask.data(), nh, 1, W,
                       alat + size_t(off) * nh * W, pool_);
  }
  OpTimer timer(prof, ProfOp::kMatO);
  ForEachHead(nh, [&](int h) {
    thread_local std::vector<float> ah, vh;
    ah.resize(size_t(T) * R);
    vh.resize(size_t(T) * dv);
    for (int t = 0; t < T; ++t)
      std::memcpy(&ah[size_t(t) * R], alat + (size_t(t) * nh + h) * W, sizeof(float) * R);
    kernels::MatMul(L.uv[h], ah.data(), T, vh.data(), nullptr);  // (T, dv)
    for (int t = 0; t < T; ++t)
      std::memcpy(att + (size_t(t) * nh + h) * dv, &vh[size_t(t) * dv], sizeof(float) * dv);
  });
}

Model::StepReads MlaMoeModel::LastStepReads() const {
  StepReads r;
  const size_t decode_experts = size_t(n_moe_layers_) * config_.moe.top_k * expert_bytes_ *
                                plan_.n_local_experts / std::max(1, config_.moe.n_routed_experts);
  r.weight_bytes = weight_bytes_ - decode_experts + size_t(moe_stats_.expert_reads) * expert_bytes_;
  if (n_moe_layers_ > 0) r.experts_per_moe_layer = double(moe_stats_.expert_reads) / n_moe_layers_;
  return r;
}

void MlaMoeModel::RunMlp(const Mlp& m, const float* x, int n, int units, float* y) {
  float* gate = Grow(gate_, size_t(n) * units);
  float* up = Grow(up_, size_t(n) * units);
  {
    OpTimer timer(profile_, ProfOp::kMatGateUp);
    kernels::MatMul(m.gate.w, x, n, gate, pool_);
    kernels::MatMul(m.up.w, x, n, up, pool_);
  }
  {
    OpTimer timer(profile_, ProfOp::kSwiGlu);
    kernels::SwiGLU(gate, up, int64_t{n} * units, gate);
  }
  OpTimer timer(profile_, ProfOp::kMatDown);
  kernels::MatMul(m.down.w, gate, n, y, pool_);
}

void MlaMoeModel::Ffn(const Layer& L, int T, float* y) {
  const int H = config_.hidden_dim;
  const float* xn = xn_.data();
  if (!L.moe) {
    RunMlp(L.dense, xn, T, plan_.ffn_len, y);
    return;
  }
  const MoeConfig& e = config_.moe;
  const int E = e.n_routed_experts, K = e.top_k;
  float* logits = Grow(logits_, size_t(T) * E);
  float* weights = Grow(weights_, size_t(T) * K);
  int32_t* ids = Grow(ids_, size_t(T) * K);
  {
    OpTimer timer(profile_, ProfOp::kMatGateUp);
    kernels::MatMul(L.router, xn, T, logits, pool_);
    RouteExperts(e, logits, L.router_bias.empty() ? nullptr : L.router_bias.data(), T, ids, weights);
  }
  // Tokens grouped by expert; experts run in ascending id order and each
  // token's outputs are summed in that order (as transformers' index_add_).
  std::vector<std::vector<std::pair<int, float>>> routed(E);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) routed[ids[t * K + k]].push_back({t, weights[t * K + k]});
  std::memset(y, 0, sizeof(float) * size_t(T) * H);
  for (int x = plan_.expert_begin; x < plan_.expert_begin + plan_.n_local_experts; ++x) {
    const auto& toks = routed[x];
    if (toks.empty()) continue;
    const int n = static_cast<int>(toks.size());
    float* ex = Grow(ex_, size_t(n) * H);
    float* ey = Grow(ey_, size_t(n) * H);
    for (int i = 0; i < n; ++i)
      std::memcpy(ex + size_t(i) * H, xn + size_t(toks[i].first) * H, sizeof(float) * H);
    RunMlp(L.experts[x], ex, n, plan_.expert_ffn_len, ey);
    for (int i = 0; i < n; ++i) {
      float* dst = y + size_t(toks[i].first) * H;
      const float* src = ey + size_t(i) * H;
      const float w = toks[i].second;
      for (int j = 0; j < H; ++j) dst[j] += src[j] * w;
    }
    moe_stats_.expert_reads += 1;
    moe_stats_.expert_tokens += n;
  }
  if (L.has_shared) {
    float* sy = Grow(ey_, size_t(T) * H);
    RunMlp(L.dense, xn, T, plan_.shared_ffn_len, sy);
    for (size_t i = 0; i < size_t(T) * H; ++i) y[i] += sy[i];
  }
}

Status MlaMoeModel::Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out) {
  const ModelConfig& c = config_;
  const int H = c.hidden_dim;
  ASSIGN_OR_RETURN(BatchLayout layout, LayoutBatch(batch, kv));
  const int T = layout.T;
  Embed(batch, layout);
  {
    OpTimer timer(profile_, ProfOp::kRope);
    kernels::RopeAngles(pos_.data(), T, inv_freq_.data(), c.mla.qk_rope_head_dim, &rope_angles_);
  }
  moe_stats_ = MoeStepStats{};
  moe_stats_.tokens = T;
  if (!capture_.empty()) out->aux_hidden.assign(size_t(T) * capture_.size() * H, 0.f);
  float* att = Grow(att_, size_t(T) * plan_.n_q_heads * c.mla.v_head_dim);
  float* o = Grow(o_, size_t(T) * H);
  {
    OpTimer timer(profile_, ProfOp::kNorm);
    kernels::RmsNorm(x_.data(), layers_[0].attn_norm.data(), T, H, c.norm_eps, xn_.data());
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    Capture(l, T, out);
    Attention(L, l, batch, layout, kv, att);
    {
      OpTimer timer(profile_, ProfOp::kMatO);
      kernels::MatMul(L.o.w, att, T, o, pool_);
    }
    {
      OpTimer timer(profile_, ProfOp::kAllReduce);
      RETURN_IF_ERROR(NormAndAllReduce(o, L.ffn_norm.data(), T)
                          .WithStage(fmt::format("layer {} attention allreduce", l)));
    }
    Ffn(L, T, o);
    const float* next_norm = l + 1 < c.n_layers ? layers_[l + 1].attn_norm.data() : final_norm_.data();
    OpTimer timer(profile_, ProfOp::kAllReduce);
    RETURN_IF_ERROR(
        NormAndAllReduce(o, next_norm, T).WithStage(fmt::format("layer {} mlp allreduce", l)));
  }
  Capture(c.n_layers, T, out);
  return Finish(batch, layout, kv, out);
}

}  // namespace specd
