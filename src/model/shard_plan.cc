#include "model/shard_plan.h"

#include <fmt/format.h>

namespace specd {

StatusOr<ShardPlan> ShardPlan::Create(const ModelConfig& c, int rank, int world, bool quantized,
                                      bool expert_parallel, int quant_block) {
  ShardPlan p;
  p.rank = rank;
  p.world = world;
  if (world < 1 || rank < 0 || rank >= world)
    return InvalidArgumentError(fmt::format("rank {} of world size {} is invalid", rank, world));
  if (c.n_heads % world != 0)
    return InvalidArgumentError(fmt::format(
        "tensor parallelism {}: n_heads = {} does not divide by {}", world, c.n_heads, world));
  if (c.ffn_dim % world != 0)
    return InvalidArgumentError(fmt::format(
        "tensor parallelism {}: ffn_dim (intermediate_size) = {} does not divide by {}", world,
        c.ffn_dim, world));
  if (c.n_kv_heads % world != 0 && world % c.n_kv_heads != 0)
    return InvalidArgumentError(fmt::format(
        "tensor parallelism {}: n_kv_heads = {} neither divides by {} nor divides it, so KV heads "
        "can be neither split nor replicated",
        world, c.n_kv_heads, world));
  p.n_q_heads = c.n_heads / world;
  p.q_head_begin = rank * p.n_q_heads;
  int group = c.n_heads / c.n_kv_heads;
  p.kv_head_begin = p.q_head_begin / group;
  int kv_end = (p.q_head_begin + p.n_q_heads - 1) / group + 1;
  p.n_kv_heads = kv_end - p.kv_head_begin;
  p.ffn_len = c.ffn_dim / world;
  p.ffn_begin = rank * p.ffn_len;
  if (expert_parallel && c.moe.n_routed_experts == 0)
    return InvalidArgumentError("expert parallelism (--ep) needs a mixture-of-experts model");
  if (c.moe.n_routed_experts > 0) {
    const int shared = c.moe.expert_ffn_dim * c.moe.n_shared_experts;
    if ((!expert_parallel && c.moe.expert_ffn_dim % world != 0) || shared % world != 0)
      return InvalidArgumentError(fmt::format(
          "tensor parallelism {}: moe_intermediate_size = {} (shared experts: {}) does not divide "
          "by {}",
          world, c.moe.expert_ffn_dim, shared, world));
    p.expert_ffn_len = c.moe.expert_ffn_dim / world;
    p.expert_ffn_begin = rank * p.expert_ffn_len;
    p.n_local_experts = c.moe.n_routed_experts;
    if (expert_parallel) {
      if (c.moe.n_routed_experts % world != 0)
        return InvalidArgumentError(fmt::format(
            "expert parallelism {}: n_routed_experts = {} does not divide by {}", world,
            c.moe.n_routed_experts, world));
      p.n_local_experts = c.moe.n_routed_experts / world;
      p.expert_begin = rank * p.n_local_experts;
      p.expert_ffn_begin = 0;
      p.expert_ffn_len = c.moe.expert_ffn_dim;
    }
    p.shared_ffn_len = shared / world;
    p.shared_ffn_begin = rank * p.shared_ffn_len;
  }
  // o_proj's input columns per head: v_head_dim under MLA, else head_dim.
  const int o_cols = p.n_q_heads * (c.IsMla() ? c.mla.v_head_dim : c.head_dim);
  if (quantized && world > 1) {
    // Routed experts are what INT4 checkpoints quantize; the shared experts
    // (often left in BF16) are checked per tensor when bound.
    const int qb = quant_block;
    if (!expert_parallel && p.expert_ffn_len % qb != 0)
      return InvalidArgumentError(fmt::format(
          "tensor parallelism {}: each rank's share of an expert is {} columns of down_proj, "
          "not a multiple of the {}-element quantization block (--ep keeps experts whole)",
          world, p.expert_ffn_len, qb));
    if (p.ffn_len % qb != 0)
      return InvalidArgumentError(fmt::format(
          "tensor parallelism {}: each rank's share of ffn_dim is {} columns of down_proj, not a "
          "multiple of the {}-element quantization block, so quantized blocks cannot be sliced",
          world, p.ffn_len, qb));
    if (o_cols % qb != 0)
      return InvalidArgumentError(fmt::format(
          "tensor parallelism {}: each rank's share of o_proj is {} columns, not a multiple of the "
          "{}-element quantization block",
          world, o_cols, qb));
  }
  p.vocab_parallel = world > 1 && c.vocab_size % world == 0;
  p.vocab_len = p.vocab_parallel ? c.vocab_size / world : c.vocab_size;
  p.vocab_begin = p.vocab_parallel ? rank * p.vocab_len : 0;
  return p;
}

std::string ShardPlan::ToString() const {
  std::string experts =
      expert_ffn_len > 0 ? fmt::format(", experts [{}, {}), expert units [{}, {}), shared units [{}, {})",
                                       expert_begin, expert_begin + n_local_experts,
                                       expert_ffn_begin, expert_ffn_begin + expert_ffn_len,
                                       shared_ffn_begin, shared_ffn_begin + shared_ffn_len)
                         : std::string();
  return fmt::format("rank {}/{}: q heads [{}, {}), kv heads [{}, {}), ffn [{}, {}){}, lm head {}",
                     rank, world, q_head_begin, q_head_begin + n_q_heads, kv_head_begin,
                     kv_head_begin + n_kv_heads, ffn_begin, ffn_begin + ffn_len, experts,
                     vocab_parallel ? fmt::format("rows [{}, {})", vocab_begin,
                                                  vocab_begin + vocab_len)
                                    : std::string("replicated"));
}

}  // namespace specd
