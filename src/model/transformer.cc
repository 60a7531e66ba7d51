#include "model/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "model/rope.h"

namespace specd {
namespace {

std::string LayerName(int l, const char* suffix) {
  return fmt::format("model.layers.{}.{}", l, suffix);
}

// Reads a 1-D float tensor (any float dtype) of `n` elements, elements
// [begin, begin + len).
Status ReadVector(const Checkpoint& ck, const std::string& name, int64_t n, int64_t begin,
                  int64_t len, std::vector<float>* out) {
  ASSIGN_OR_RETURN(TensorView t, ck.Get(name, {n}));
  if (IsQuantized(t.dtype) || t.dtype == DType::kI64 || t.dtype == DType::kI32 ||
      t.dtype == DType::kBool || t.dtype == DType::kI8) {
    return UnsupportedError(fmt::format("{}: tensor {} has dtype {}, expected f32, f16 or bf16",
                                        ck.path(), name, DTypeName(t.dtype)));
  }
  std::vector<float> all(static_cast<size_t>(n));
  DequantizeRow(t.dtype, t.data, all.data(), n);
  out->assign(all.begin() + begin, all.begin() + begin + len);
  return Status::Ok();
}

// Binds rows [row_begin, row_begin + row_len) and columns [col_begin,
// col_begin + col_len) of the (out_full, in_full) weight `name`.
Status BindLinear(const Checkpoint& ck, const std::string& name, int64_t out_full,
                  int64_t in_full, int64_t row_begin, int64_t row_len, int64_t col_begin,
                  int64_t col_len, Linear* lin) {
  ASSIGN_OR_RETURN(TensorView w, ck.Get(name, {out_full, in_full}));
  if (w.dtype != DType::kF32 && w.dtype != DType::kF16 && w.dtype != DType::kBF16 &&
      !IsQuantized(w.dtype)) {
    return UnsupportedError(fmt::format("{}: weight {} has dtype {}, expected a float or Q8_0/Q4_0",
                                        ck.path(), name, DTypeName(w.dtype)));
  }
  lin->w = w;
  lin->w.shape = {row_len, col_len};
  if (col_begin == 0 && col_len == in_full) {
    lin->w.data = w.row(row_begin);
  } else {
    int block = DTypeBlockElems(w.dtype);
    if (col_begin % block != 0 || col_len % block != 0) {
      return InvalidArgumentError(fmt::format(
          "{}: cannot slice columns [{}, {}) of {} ({}): not on {}-element block boundaries",
          ck.path(), col_begin, col_begin + col_len, name, DTypeName(w.dtype), block));
    }
    size_t out_row = RowBytes(w.dtype, col_len);
    size_t skip = RowBytes(w.dtype, col_begin);
    lin->owned.resize(out_row * static_cast<size_t>(row_len));
    for (int64_t r = 0; r < row_len; ++r)
      std::memcpy(lin->owned.data() + r * out_row, w.row(row_begin + r) + skip, out_row);
    lin->w.data = lin->owned.data();
  }
  lin->w.nbytes = lin->w.row_bytes() * static_cast<size_t>(row_len);
  std::string bias_name = name.substr(0, name.size() - std::string("weight").size()) + "bias";
  if (ck.Has(bias_name)) {
    RETURN_IF_ERROR(ReadVector(ck, bias_name, out_full, row_begin, row_len, &lin->bias));
  }
  return Status::Ok();
}

void AddBias(const std::vector<float>& bias, int n_tokens, float* y) {
  if (bias.empty()) return;
  size_t n = bias.size();
  for (int t = 0; t < n_tokens; ++t)
    for (size_t i = 0; i < n; ++i) y[t * n + i] += bias[i];
}

template <typename T>
T* Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
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
  ASSIGN_OR_RETURN(embed_, ck.Get("model.embed_tokens.weight", {c.vocab_size, H}));
  std::string head_name = ck.Has("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";
  ASSIGN_OR_RETURN(lm_head_, ck.Get(head_name, {c.vocab_size, H}));
  RETURN_IF_ERROR(ReadVector(ck, "model.norm.weight", H, 0, H, &final_norm_));
  weight_bytes_ = lm_head_.row_bytes() * static_cast<size_t>(plan_.vocab_len);

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

Status Transformer::NormAndAllReduce(float* partial, const float* norm_w, int n_tokens) {
  const int H = config_.hidden_dim;
  if (options_.fuse_allreduce_norm) {
    return comm_->AllReduceResidualRmsNorm(partial, x_.data(), norm_w, config_.norm_eps, n_tokens,
                                           H, xn_.data());
  }
  RETURN_IF_ERROR(comm_->AllReduce(partial, partial, static_cast<size_t>(n_tokens) * H,
                                   CommDType::kF32));
  float* x = x_.data();
  for (size_t i = 0; i < static_cast<size_t>(n_tokens) * H; ++i) x[i] += partial[i];
  kernels::RmsNorm(x, norm_w, n_tokens, H, config_.norm_eps, xn_.data());
  return Status::Ok();
}

Status Transformer::Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out) {
  const ModelConfig& c = config_;
  const int H = c.hidden_dim, hd = c.head_dim;
  const int nq = plan_.n_q_heads, nkv = plan_.n_kv_heads;
  const int qd = nq * hd, kvd = nkv * hd, fd = plan_.ffn_len;

  // Lay the batch out as one (T, ...) activation matrix.
  int T = 0;
  std::vector<int> offset(batch.size()), length(batch.size());
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    if (in.tokens.empty()) return InvalidArgumentError("forward: sequence with no tokens");
    if (!in.pos.empty() && in.pos.size() != in.tokens.size())
      return InvalidArgumentError(fmt::format("forward: {} positions for {} tokens", in.pos.size(),
                                              in.tokens.size()));
    size_t n = in.tokens.size();
    if (!in.tree_mask.empty() && in.tree_mask.size() != n * n)
      return InvalidArgumentError(
          fmt::format("forward: tree mask has {} entries, expected {}", in.tree_mask.size(), n * n));
    for (int32_t tok : in.tokens) {
      if (tok < 0 || tok >= c.vocab_size)
        return InvalidArgumentError(
            fmt::format("token id {} out of range: vocabulary has {} tokens", tok, c.vocab_size));
    }
    offset[s] = T;
    length[s] = kv->Length(in.seq);
    if (length[s] + static_cast<int>(n) > c.max_seq_len)
      return OutOfRangeError(fmt::format("sequence of {} tokens exceeds the context length {}",
                                         length[s] + n, c.max_seq_len));
    T += static_cast<int>(n);
  }
  for (size_t s = 0; s < batch.size(); ++s)
    RETURN_IF_ERROR(kv->Reserve(batch[s].seq, static_cast<int>(batch[s].tokens.size())));

  float* x = Grow(x_, size_t(T) * H);
  float* xn = Grow(xn_, size_t(T) * H);
  float* q = Grow(q_, size_t(T) * qd);
  float* k = Grow(k_, size_t(T) * kvd);
  float* v = Grow(v_, size_t(T) * kvd);
  float* att = Grow(att_, size_t(T) * qd);
  float* o = Grow(o_, size_t(T) * H);
  float* gate = Grow(gate_, size_t(T) * fd);
  float* up = Grow(up_, size_t(T) * fd);
  int32_t* pos = Grow(pos_, size_t(T));

  OpProfile* prof = profile_;
  for (size_t s = 0; s < batch.size(); ++s) {
    OpTimer timer(prof, ProfOp::kEmbed);
    const SeqInput& in = batch[s];
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      int t = offset[s] + static_cast<int>(i);
      pos[t] = in.pos.empty() ? length[s] + static_cast<int>(i) : in.pos[i];
      DequantizeRow(embed_.dtype, embed_.row(in.tokens[i]), x + size_t(t) * H, H);
    }
  }

  const size_t n_cap = capture_.size();
  if (n_cap) out->aux_hidden.assign(size_t(T) * n_cap * H, 0.f);
  auto capture = [&](int layer) {
    for (size_t ci = 0; ci < n_cap; ++ci) {
      if (capture_[ci] != layer) continue;
      for (int t = 0; t < T; ++t)
        std::memcpy(&out->aux_hidden[(size_t(t) * n_cap + ci) * H], x + size_t(t) * H,
                    sizeof(float) * H);
    }
  };

  const bool interleaved = c.rope_style == RopeStyle::kInterleaved;
  {
    OpTimer timer(prof, ProfOp::kNorm);
    kernels::RmsNorm(x, layers_[0].attn_norm.data(), T, H, c.norm_eps, xn);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    Layer& L = layers_[l];
    capture(l);
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
      kernels::Rope(q, T, nq, hd, pos, inv_freq_.data(), interleaved);
      kernels::Rope(k, T, nkv, hd, pos, inv_freq_.data(), interleaved);
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
  capture(c.n_layers);
  for (size_t s = 0; s < batch.size(); ++s)
    kv->Advance(batch[s].seq, static_cast<int>(batch[s].tokens.size()));

  // Logits for the requested rows; xn holds the final-normed hidden states.
  std::vector<int> rows;
  out->seq_row.assign(batch.size(), 0);
  for (size_t s = 0; s < batch.size(); ++s) {
    out->seq_row[s] = static_cast<int>(rows.size());
    int n = static_cast<int>(batch[s].tokens.size());
    for (int i = batch[s].all_logits ? 0 : n - 1; i < n; ++i) rows.push_back(offset[s] + i);
  }
  OpTimer head_timer(prof, ProfOp::kLmHead);
  const int R = static_cast<int>(rows.size());
  float* hr = Grow(att_, size_t(R) * H);  // att is free now; reuse as (R, H)
  for (int r = 0; r < R; ++r)
    std::memmove(hr + size_t(r) * H, xn + size_t(rows[r]) * H, sizeof(float) * H);
  const int V = c.vocab_size;
  out->logits.resize(size_t(R) * V);
  if (!plan_.vocab_parallel) {
    kernels::MatMul(lm_head_, hr, R, out->logits.data(), pool_);
    return Status::Ok();
  }
  const int Vl = plan_.vocab_len, W = plan_.world;
  float* local = Grow(logits_local_, size_t(R) * Vl);
  kernels::MatMulRows(lm_head_, plan_.vocab_begin, plan_.vocab_begin + Vl, hr, R, local, pool_);
  float* all = Grow(gathered_, size_t(W) * R * Vl);
  RETURN_IF_ERROR(comm_->AllGather(local, all, size_t(R) * Vl, CommDType::kF32)
                      .WithStage("lm head allgather"));
  for (int w = 0; w < W; ++w)
    for (int r = 0; r < R; ++r)
      std::memcpy(&out->logits[size_t(r) * V + size_t(w) * Vl], all + (size_t(w) * R + r) * Vl,
                  sizeof(float) * Vl);
  return Status::Ok();
}

}  // namespace specd
