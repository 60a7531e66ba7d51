// An EAGLE-3 draft head as SGLang and vLLM load it (LlamaForCausalLMEagle3):
// one decoder layer that reads the target's fused hidden states.
//
// Forward for n input rows (shapes per row):
//   hidden  = fc(aux)             aux: (3·H_target) low/mid/high target states
//             or the draft's own output hidden (H) on later draft steps
//   x       = [input_layernorm(embed(token)), hidden_norm(hidden)]   (2H)
//   q,k,v   = x·Wqᵀ, x·Wkᵀ, x·Wvᵀ; RoPE at the row's position
//   h       = hidden + o_proj(attention(q, draft KV))
//   out     = h + down(silu(gate(n)) ⊙ up(n)),  n = post_attention_layernorm(h)
//   logits  = lm_head(norm(out))  over the draft vocabulary; target id = d + d2t[d]
// `out` is what the next draft step feeds back as `hidden`.
//
// Position convention: draft slot t holds (target state after token t, token
// t+1) and predicts token t+2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/thread_pool.h"
#include "loader/checkpoint.h"
#include "model/model.h"

namespace specd {

class Eagle3Head {
 public:
  // Per-sequence draft KV cache: slots (length, kv_dim) for K and V.
  struct State {
    std::vector<float> k, v;
    int length = 0;
    std::vector<float> last_hidden;  // (H) output of the last committed slot
    std::vector<float> last_logits;  // (draft_vocab) logits of the last committed slot
  };

  // Loads the head at `path` (folder with config.json + safetensors) for
  // `target`, whose embedding it shares unless it has embed_tokens.weight.
  static StatusOr<std::unique_ptr<Eagle3Head>> Create(const std::string& path,
                                                      const Model& target,
                                                      const LoadOptions& load,
                                                      kernels::ThreadPool* pool);

  int hidden_dim() const { return H_; }
  int draft_vocab() const { return draft_vocab_; }
  // Target layers whose input states feed fc, in low/mid/high order.
  const std::vector<int>& aux_layers() const { return aux_layers_; }
  int32_t ToTarget(int32_t draft_id) const {
    return static_cast<int32_t>(draft_id + d2t_[draft_id]);
  }
  size_t weight_bytes() const { return weight_bytes_; }

  // Runs n rows. Row i is at RoPE position pos[i] and is written to slot
  // st->length + i; it attends to slots [0, n_prefix) and to the slots listed
  // in visible[i] (which must include its own); an empty `visible` means
  // causal: row i sees slots [n_prefix, its own]. hidden: (n, 3·H_target) when
  // from_aux, else (n, H). Outputs (n, H) and (n, draft_vocab), or only the
  // last row's logits (1, draft_vocab) when last_logits_only.
  // Appends n slots to `st` (Truncate to drop them).
  Status Forward(State* st, const std::vector<int32_t>& tokens, const float* hidden,
                 bool from_aux, const std::vector<int32_t>& pos, int n_prefix,
                 const std::vector<std::vector<int>>& visible, std::vector<float>* out_hidden,
                 std::vector<float>* out_logits, bool last_logits_only = false);
  void Truncate(State* st, int length) const;

 private:
  Eagle3Head() = default;
  std::unique_ptr<Checkpoint> ckpt_;
  kernels::ThreadPool* pool_ = nullptr;
  int H_ = 0, H_target_ = 0, n_heads_ = 0, n_kv_heads_ = 0, head_dim_ = 0, ffn_ = 0;
  int draft_vocab_ = 0, target_vocab_ = 0;
  float eps_ = 1e-6f;
  bool interleaved_rope_ = false;
  TensorView embed_, fc_, wq_, wk_, wv_, wo_, w_gate_, w_up_, w_down_, lm_head_;
  std::vector<float> input_norm_, hidden_norm_, post_norm_, final_norm_, inv_freq_;
  std::vector<int64_t> d2t_;
  std::vector<int> aux_layers_;
  size_t weight_bytes_ = 0;
};

}  // namespace specd
