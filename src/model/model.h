// A target model's forward pass over a batch of sequences and a paged KV
// cache, whatever its family: the Llama family (model/transformer.h) or the
// DeepSeek-V2/V3 family with Multi-head Latent Attention and MoE
// (model/mla_moe_model.h). CreateModel picks by ModelConfig::arch.
//
// Knows nothing of processes: tensor parallelism is the ShardPlan this rank's
// weights were cut with plus Communicator calls, which are no-ops at world 1.
// Every rank runs Forward with the same batch; the logits are complete on
// every rank (vocab-parallel LM heads are all-gathered).
#pragma once

#include <memory>
#include <vector>

#include "base/op_profile.h"
#include "base/status.h"
#include "comm/communicator.h"
#include "kernels/thread_pool.h"
#include "loader/checkpoint.h"
#include "model/kv_cache.h"
#include "model/shard_plan.h"

namespace specd {

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

class Model {
 public:
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  const ShardPlan& plan() const { return plan_; }
  // Bytes of weights one decode step reads on this rank (MoE: the experts of
  // an average token, top_k of them).
  size_t weight_bytes() const { return weight_bytes_; }
  // The embedding table (vocab, hidden), e.g. for a draft head sharing it.
  const TensorView& embedding() const { return embed_; }
  // What the last Forward read of this rank's weights: all of them for a dense
  // model; for MoE, everything but the routed experts plus the distinct
  // experts the step's tokens chose (a verify pass of n tokens reads up to
  // n · top_k experts per layer, a decode step top_k).
  struct StepReads {
    size_t weight_bytes = 0;
    double experts_per_moe_layer = 0;  // distinct routed experts run, mean over MoE layers
  };
  virtual StepReads LastStepReads() const { return {weight_bytes_, 0}; }
  // KV cache slot widths on this rank: K and V floats (V 0: V aliases K).
  virtual int kv_k_dim() const = 0;
  virtual int kv_v_dim() const = 0;

  // Layers whose input residual stream Forward copies into aux_hidden.
  void SetCaptureLayers(std::vector<int> layers) { capture_ = std::move(layers); }
  const std::vector<int>& capture_layers() const { return capture_; }

  // Per-op timers for --profile (null: off). Not owned; must outlive Forward calls.
  void SetProfile(OpProfile* profile) { profile_ = profile; }

  // Runs one step: appends each sequence's tokens to its KV cache (reserving
  // pages; ResourceExhausted if full, nothing appended) and computes logits.
  // REQUIRES: every seq live in `kv`; tokens < vocab_size (checked).
  virtual Status Forward(const std::vector<SeqInput>& batch, KvCache* kv, ForwardOutput* out) = 0;

 protected:
  // Where each sequence's tokens sit in the step's (T, ...) activations.
  struct BatchLayout {
    int T = 0;                // tokens in the step
    std::vector<int> offset;  // first row of sequence s
    std::vector<int> length;  // KV length of sequence s before the step
  };

  Model() = default;
  // Embedding, LM head (tied or not) and final norm.
  Status BindCommon(const Checkpoint& ck);
  // Checks the batch (tokens, positions, masks, context length) and reserves
  // its KV pages.
  StatusOr<BatchLayout> LayoutBatch(const std::vector<SeqInput>& batch, KvCache* kv) const;
  // x_ = embeddings (T, hidden); pos_ = RoPE positions (T).
  void Embed(const std::vector<SeqInput>& batch, const BatchLayout& layout);
  // Copies x_ into out->aux_hidden for capture layers equal to `layer`.
  void Capture(int layer, int T, ForwardOutput* out) const;
  // x_ += allreduce(partial); xn_ = rmsnorm(x_)·norm_w (fused when enabled).
  Status NormAndAllReduce(float* partial, const float* norm_w, int T);
  // Logits of the requested rows from xn_ (final-normed), gathered across
  // ranks for vocab-parallel heads; advances every sequence's KV length.
  Status Finish(const std::vector<SeqInput>& batch, const BatchLayout& layout, KvCache* kv,
                ForwardOutput* out);

  template <typename T>
  static T* Grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }

  ModelConfig config_;
  ShardPlan plan_;
  TransformerOptions options_;
  Communicator* comm_ = nullptr;
  kernels::ThreadPool* pool_ = nullptr;
  TensorView embed_;    // (vocab, hidden), replicated
  TensorView lm_head_;  // (vocab, hidden); this rank uses rows of its plan
  std::vector<float> final_norm_;
  std::vector<int> capture_;
  size_t weight_bytes_ = 0;
  OpProfile* profile_ = nullptr;
  // Scratch, grown to the largest batch seen.
  std::vector<float> x_, xn_, head_in_, logits_local_, gathered_;
  std::vector<int32_t> pos_;
};

// The model family of ckpt.config().arch, bound to this rank's shard.
// `ckpt`, `comm` and `pool` must outlive the model.
StatusOr<std::unique_ptr<Model>> CreateModel(const Checkpoint& ckpt, const ShardPlan& plan,
                                             Communicator* comm, kernels::ThreadPool* pool,
                                             const TransformerOptions& options = {});

}  // namespace specd
