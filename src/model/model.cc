#include "model/model.h"

#include <fmt/format.h>

#include <cstring>

#include "kernels/ops.h"
#include "model/mla_moe_model.h"
#include "model/transformer.h"
#include "model/weight_binding.h"

namespace specd {

StatusOr<std::unique_ptr<Model>> CreateModel(const Checkpoint& ckpt, const ShardPlan& plan,
                                             Communicator* comm, kernels::ThreadPool* pool,
                                             const TransformerOptions& options) {
  const std::string& arch = ckpt.config().arch;
  if (arch == "deepseek_v2" || arch == "deepseek_v3") {
    ASSIGN_OR_RETURN(std::unique_ptr<MlaMoeModel> m,
                     MlaMoeModel::Create(ckpt, plan, comm, pool, options));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (arch == "llama_eagle3") {
    return InvalidArgumentError(fmt::format(
        "{}: an EAGLE-3 draft head cannot be served as the target model; pass it with "
        "--speculative-draft-model-path",
        ckpt.path()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Transformer> t,
                   Transformer::Create(ckpt, plan, comm, pool, options));
  return std::unique_ptr<Model>(std::move(t));
}

Status Model::BindCommon(const Checkpoint& ck) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_dim;
  ASSIGN_OR_RETURN(embed_, ck.Get("model.embed_tokens.weight", {c.vocab_size, H}));
  std::string head_name = ck.Has("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";
  ASSIGN_OR_RETURN(lm_head_, ck.Get(head_name, {c.vocab_size, H}));
  RETURN_IF_ERROR(ReadVector(ck, "model.norm.weight", H, 0, H, &final_norm_));
  weight_bytes_ += lm_head_.row_bytes() * static_cast<size_t>(plan_.vocab_len);
  return Status::Ok();
}

StatusOr<Model::BatchLayout> Model::LayoutBatch(const std::vector<SeqInput>& batch,
                                                KvCache* kv) const {
  const ModelConfig& c = config_;
  BatchLayout L;
  L.offset.resize(batch.size());
  L.length.resize(batch.size());
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
    L.offset[s] = L.T;
    L.length[s] = kv->Length(in.seq);
    if (L.length[s] + static_cast<int>(n) > c.max_seq_len)
      return OutOfRangeError(fmt::format("sequence of {} tokens exceeds the context length {}",
                                         L.length[s] + n, c.max_seq_len));
    L.T += static_cast<int>(n);
  }
  for (size_t s = 0; s < batch.size(); ++s)
    RETURN_IF_ERROR(kv->Reserve(batch[s].seq, static_cast<int>(batch[s].tokens.size())));
  return L;
}

void Model::Embed(const std::vector<SeqInput>& batch, const BatchLayout& layout) {
  const int H = config_.hidden_dim;
  float* x = Grow(x_, size_t(layout.T) * H);
  Grow(xn_, size_t(layout.T) * H);
  int32_t* pos = Grow(pos_, size_t(layout.T));
  OpTimer timer(profile_, ProfOp::kEmbed);
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      int t = layout.offset[s] + static_cast<int>(i);
      pos[t] = in.pos.empty() ? layout.length[s] + static_cast<int>(i) : in.pos[i];
      DequantizeRow(embed_.dtype, embed_.row(in.tokens[i]), x + size_t(t) * H, H);
    }
  }
}

void Model::Capture(int layer, int T, ForwardOutput* out) const {
  const size_t n_cap = capture_.size();
  const int H = config_.hidden_dim;
  for (size_t ci = 0; ci < n_cap; ++ci) {
    if (capture_[ci] != layer) continue;
    for (int t = 0; t < T; ++t)
      std::memcpy(&out->aux_hidden[(size_t(t) * n_cap + ci) * H], x_.data() + size_t(t) * H,
                  sizeof(float) * H);
  }
}

Status Model::NormAndAllReduce(float* partial, const float* norm_w, int T) {
  const int H = config_.hidden_dim;
  if (options_.fuse_allreduce_norm) {
    return comm_->AllReduceResidualRmsNorm(partial, x_.data(), norm_w, config_.norm_eps, T, H,
                                           xn_.data());
  }
  RETURN_IF_ERROR(comm_->AllReduce(partial, partial, static_cast<size_t>(T) * H, CommDType::kF32));
  float* x = x_.data();
  for (size_t i = 0; i < static_cast<size_t>(T) * H; ++i) x[i] += partial[i];
  kernels::RmsNorm(x, norm_w, T, H, config_.norm_eps, xn_.data());
  return Status::Ok();
}

Status Model::Finish(const std::vector<SeqInput>& batch, const BatchLayout& layout, KvCache* kv,
                     ForwardOutput* out) {
  for (size_t s = 0; s < batch.size(); ++s)
    kv->Advance(batch[s].seq, static_cast<int>(batch[s].tokens.size()));

  // Logits for the requested rows; xn_ holds the final-normed hidden states.
  const int H = config_.hidden_dim;
  std::vector<int> rows;
  out->seq_row.assign(batch.size(), 0);
  for (size_t s = 0; s < batch.size(); ++s) {
    out->seq_row[s] = static_cast<int>(rows.size());
    int n = static_cast<int>(batch[s].tokens.size());
    for (int i = batch[s].all_logits ? 0 : n - 1; i < n; ++i) rows.push_back(layout.offset[s] + i);
  }
  OpTimer head_timer(profile_, ProfOp::kLmHead);
  const int R = static_cast<int>(rows.size());
  float* hr = Grow(head_in_, size_t(R) * H);
  for (int r = 0; r < R; ++r)
    std::memcpy(hr + size_t(r) * H, xn_.data() + size_t(rows[r]) * H, sizeof(float) * H);
  const int V = config_.vocab_size;
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
