#include "spec/eagle3_head.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "model/rope.h"

namespace specd {
namespace {

Status ReadFloats(const Checkpoint& ck, const std::string& name, int64_t n,
                  std::vector<float>* out) {
  ASSIGN_OR_RETURN(TensorView t, ck.Get(name, {n}));
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    return UnsupportedError(fmt::format("{}: tensor {} has dtype {}, expected f32, f16 or bf16",
                                        ck.path(), name, DTypeName(t.dtype)));
  out->resize(n);
  DequantizeRow(t.dtype, t.data, out->data(), n);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Eagle3Head>> Eagle3Head::Create(const std::string& path,
                                                         const Model& target,
                                                         const LoadOptions& load,
                                                         kernels::ThreadPool* pool) {
  std::unique_ptr<Eagle3Head> h(new Eagle3Head());
  h->pool_ = pool;
  ASSIGN_OR_RETURN(h->ckpt_, OpenCheckpoint(path, load));
  const Checkpoint& ck = *h->ckpt_;
  const ModelConfig& c = ck.config();
  const ModelConfig& tc = target.config();
  if (c.arch != "llama_eagle3")
    return InvalidArgumentError(fmt::format(
        "{}: draft model architecture is '{}', expected an EAGLE-3 head "
        "(architectures: [\"LlamaForCausalLMEagle3\"])",
        path, c.arch));
  if (c.vocab_size != tc.vocab_size)
    return InvalidArgumentError(fmt::format(
        "{}: the head's vocab_size is {} but the target model's vocabulary has {} tokens: the "
        "head was trained for another model",
        path, c.vocab_size, tc.vocab_size));
  h->H_ = c.hidden_dim;
  h->H_target_ = c.target_hidden_size > 0 ? c.target_hidden_size : tc.hidden_dim;
  if (h->H_target_ != tc.hidden_dim)
    return InvalidArgumentError(fmt::format(
        "{}: target_hidden_size is {} but the target model's hidden size is {}", path,
        h->H_target_, tc.hidden_dim));
  h->n_heads_ = c.n_heads;
  h->n_kv_heads_ = c.n_kv_heads;
  h->head_dim_ = c.head_dim;
  h->ffn_ = c.ffn_dim;
  h->eps_ = c.norm_eps;
  h->draft_vocab_ = c.draft_vocab_size > 0 ? c.draft_vocab_size : c.vocab_size;
  h->target_vocab_ = tc.vocab_size;
  h->inv_freq_ = RopeInvFreq(c);
  h->interleaved_rope_ = c.rope_style == RopeStyle::kInterleaved;
  const int64_t H = h->H_, Ht = h->H_target_;
  if (ck.Has("embed_tokens.weight")) {
    ASSIGN_OR_RETURN(h->embed_, ck.Get("embed_tokens.weight", {tc.vocab_size, H}));
  } else {
    if (tc.hidden_dim != H)
      return InvalidArgumentError(fmt::format(
          "{}: the head has no embed_tokens.weight and its hidden size {} differs from the "
          "target's {}, so it cannot share the target's embeddings",
          path, H, tc.hidden_dim));
    h->embed_ = target.embedding();
  }
  const int64_t qd = int64_t{h->n_heads_} * h->head_dim_, kvd = int64_t{h->n_kv_heads_} * h->head_dim_;
  ASSIGN_OR_RETURN(h->fc_, ck.Get("fc.weight", {H, 3 * Ht}));
  ASSIGN_OR_RETURN(h->wq_, ck.Get("midlayer.self_attn.q_proj.weight", {qd, 2 * H}));
  ASSIGN_OR_RETURN(h->wk_, ck.Get("midlayer.self_attn.k_proj.weight", {kvd, 2 * H}));
  ASSIGN_OR_RETURN(h->wv_, ck.Get("midlayer.self_attn.v_proj.weight", {kvd, 2 * H}));
  ASSIGN_OR_RETURN(h->wo_, ck.Get("midlayer.self_attn.o_proj.weight", {H, qd}));
  ASSIGN_OR_RETURN(h->w_gate_, ck.Get("midlayer.mlp.gate_proj.weight", {h->ffn_, H}));
  ASSIGN_OR_RETURN(h->w_up_, ck.Get("midlayer.mlp.up_proj.weight", {h->ffn_, H}));
  ASSIGN_OR_RETURN(h->w_down_, ck.Get("midlayer.mlp.down_proj.weight", {H, h->ffn_}));
  ASSIGN_OR_RETURN(h->lm_head_, ck.Get("lm_head.weight", {h->draft_vocab_, H}));
  RETURN_IF_ERROR(ReadFloats(ck, "midlayer.input_layernorm.weight", H, &h->input_norm_));
  RETURN_IF_ERROR(ReadFloats(ck, "midlayer.hidden_norm.weight", H, &h->hidden_norm_));
  RETURN_IF_ERROR(ReadFloats(ck, "midlayer.post_attention_layernorm.weight", H, &h->post_norm_));
  RETURN_IF_ERROR(ReadFloats(ck, "norm.weight", H, &h->final_norm_));
  for (const TensorView* t : {&h->fc_, &h->wq_, &h->wk_, &h->wv_, &h->wo_, &h->w_gate_, &h->w_up_,
                              &h->w_down_, &h->lm_head_})
    h->weight_bytes_ += t->nbytes;

  // t2d (bool per target id: has a draft id) is not used, but a present one
  // must have the target's vocabulary: another size means another target.
  if (ck.Has("t2d")) RETURN_IF_ERROR(ck.Get("t2d", {tc.vocab_size}).status());
  // d2t: draft id -> target id offset. Absent: identity (draft vocab == target vocab).
  h->d2t_.assign(h->draft_vocab_, 0);
  if (ck.Has("d2t")) {
    ASSIGN_OR_RETURN(TensorView d2t, ck.Get("d2t", {h->draft_vocab_}));
    if (d2t.dtype != DType::kI64)
      return InvalidArgumentError(fmt::format("{}: d2t has dtype {}, expected int64", path,
                                              DTypeName(d2t.dtype)));
    std::memcpy(h->d2t_.data(), d2t.data, sizeof(int64_t) * h->draft_vocab_);
  } else if (h->draft_vocab_ != tc.vocab_size) {
    return NotFoundError(fmt::format(
        "{}: tensor d2t missing, required because draft_vocab_size {} differs from the target "
        "vocabulary {}",
        path, h->draft_vocab_, tc.vocab_size));
  }
  for (int d = 0; d < h->draft_vocab_; ++d) {
    int64_t t = d + h->d2t_[d];
    if (t < 0 || t >= tc.vocab_size)
      return InvalidArgumentError(fmt::format(
          "{}: d2t maps draft id {} to target id {}, outside the target vocabulary of {}", path, d,
          t, tc.vocab_size));
  }
  int L = tc.n_layers;
  h->aux_layers_ = c.eagle_aux_layer_ids.empty() ? std::vector<int>{2, L / 2, L - 3}
                                                 : c.eagle_aux_layer_ids;
  if (h->aux_layers_.size() != 3)
    return InvalidArgumentError(fmt::format("{}: eagle_aux_hidden_state_layer_ids has {} ids, "
                                            "expected 3", path, h->aux_layers_.size()));
  for (int id : h->aux_layers_)
    if (id < 0 || id >= L)
      return InvalidArgumentError(fmt::format(
          "{}: aux hidden state layer id {} is outside the target's {} layers", path, id, L));
  return h;
}

void Eagle3Head::Truncate(State* st, int length) const {
  if (length >= st->length) return;
  const size_t kvd = static_cast<size_t>(n_kv_heads_) * head_dim_;
  st->length = length;
  st->k.resize(length * kvd);
  st->v.resize(length * kvd);
}

Status Eagle3Head::Forward(State* st, const std::vector<int32_t>& tokens, const float* hidden,
                           bool from_aux, const std::vector<int32_t>& pos, int n_prefix,
                           const std::vector<std::vector<int>>& visible,
                           std::vector<float>* out_hidden, std::vector<float>* out_logits,
                           bool last_logits_only) {
  const int n = static_cast<int>(tokens.size());
  const int H = H_, hd = head_dim_, nh = n_heads_, nkv = n_kv_heads_;
  const int qd = nh * hd, kvd = nkv * hd;
  if (pos.size() != tokens.size() || (!visible.empty() && visible.size() != tokens.size()))
    return InternalError("draft forward: tokens, positions and visibility lists differ in length");

  std::vector<float> h(static_cast<size_t>(n) * H);
  if (from_aux) kernels::MatMul(fc_, hidden, n, h.data(), pool_);
  else std::memcpy(h.data(), hidden, sizeof(float) * n * H);

  // x = [input_layernorm(embed), hidden_norm(h)]  (n, 2H)
  std::vector<float> emb(static_cast<size_t>(n) * H), x(static_cast<size_t>(n) * 2 * H);
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= target_vocab_)
      return InvalidArgumentError(fmt::format("draft forward: token id {} out of range", tokens[i]));
    DequantizeRow(embed_.dtype, embed_.row(tokens[i]), emb.data() + size_t(i) * H, H);
  }
  kernels::RmsNorm(emb.data(), input_norm_.data(), n, H, eps_, emb.data());
  std::vector<float> hn(static_cast<size_t>(n) * H);
  kernels::RmsNorm(h.data(), hidden_norm_.data(), n, H, eps_, hn.data());
  for (int i = 0; i < n; ++i) {
    std::memcpy(&x[size_t(i) * 2 * H], &emb[size_t(i) * H], sizeof(float) * H);
    std::memcpy(&x[size_t(i) * 2 * H + H], &hn[size_t(i) * H], sizeof(float) * H);
  }
  std::vector<float> q(size_t(n) * qd), k(size_t(n) * kvd), v(size_t(n) * kvd);
  kernels::MatMul(wq_, x.data(), n, q.data(), pool_);
  kernels::MatMul(wk_, x.data(), n, k.data(), pool_);
  kernels::MatMul(wv_, x.data(), n, v.data(), pool_);
  std::vector<float> angles;
  kernels::RopeAngles(pos.data(), n, inv_freq_.data(), hd, &angles);
  kernels::RopeWithAngles(q.data(), n, nh, hd, angles.data(), interleaved_rope_);
  kernels::RopeWithAngles(k.data(), n, nkv, hd, angles.data(), interleaved_rope_);
  st->k.insert(st->k.end(), k.begin(), k.end());
  st->v.insert(st->v.end(), v.begin(), v.end());
  st->length += n;

  // The shared attention kernel over the draft KV (one page holding every
  // slot). Causal rows see every slot up to their own. Rows with visible
  // sets: the kernel's query window is the slots from n_prefix on (all
  // visible below it); rows of the window that are not this call's (earlier
  // tree levels) get zero queries that see only their own slot, and their
  // outputs are dropped.
  std::vector<float> att(size_t(n) * qd);
  float* k_page = st->k.data();
  float* v_page = st->v.data();
  const kernels::KvPages pages{&k_page, &v_page, std::max(1, st->length)};
  if (visible.empty()) {
    kernels::Attention(q.data(), n, st->length, pages, nullptr, nh, nkv, hd, att.data(), pool_);
  } else {
    const int W = st->length - n_prefix, pad = W - n;
    if (n_prefix < 0 || pad < 0)
      return InternalError("draft forward: the prefix overlaps this call's rows");
    std::vector<float> qw(size_t(W) * qd, 0.f), ow(size_t(W) * qd);
    std::copy(q.begin(), q.end(), qw.begin() + size_t(pad) * qd);
    std::vector<uint8_t> mask(size_t(W) * W, 0);
    for (int t = 0; t < pad; ++t) mask[size_t(t) * W + t] = 1;
    for (int i = 0; i < n; ++i) {
      for (int slot : visible[i]) {
        if (slot < n_prefix) continue;  // the prefix is always visible
        if (slot >= st->length)
          return InternalError(fmt::format("draft forward: visible slot {} of {}", slot,
                                           st->length));
        mask[size_t(pad + i) * W + (slot - n_prefix)] = 1;
      }
    }
    kernels::Attention(qw.data(), W, st->length, pages, mask.data(), nh, nkv, hd, ow.data(),
                       pool_);
    std::copy(ow.begin() + size_t(pad) * qd, ow.end(), att.begin());
  }
  std::vector<float> o(size_t(n) * H);
  kernels::MatMul(wo_, att.data(), n, o.data(), pool_);
  for (size_t i = 0; i < o.size(); ++i) h[i] += o[i];
  std::vector<float> pn(size_t(n) * H), g(size_t(n) * ffn_), u(size_t(n) * ffn_);
  kernels::RmsNorm(h.data(), post_norm_.data(), n, H, eps_, pn.data());
  kernels::MatMul(w_gate_, pn.data(), n, g.data(), pool_);
  kernels::MatMul(w_up_, pn.data(), n, u.data(), pool_);
  kernels::SwiGLU(g.data(), u.data(), int64_t{n} * ffn_, g.data());
  kernels::MatMul(w_down_, g.data(), n, o.data(), pool_);
  for (size_t i = 0; i < o.size(); ++i) h[i] += o[i];
  *out_hidden = h;
  // Logits of the last row only, when that is all the caller keeps: the LM
  // head over the draft vocabulary is most of a row's cost.
  const int first = last_logits_only ? n - 1 : 0;
  kernels::RmsNorm(h.data() + size_t(first) * H, final_norm_.data(), n - first, H, eps_,
                   pn.data());
  out_logits->resize(size_t(n - first) * draft_vocab_);
  kernels::MatMul(lm_head_, pn.data(), n - first, out_logits->data(), pool_);
  return Status::Ok();
}

}  // namespace specd
