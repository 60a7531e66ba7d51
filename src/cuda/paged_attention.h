// Decode attention over a paged KV cache on the device: one query token per
// sequence, each attending to every filled slot of its own sequence.
//
// Cache layout: one layer of model/kv_cache.h's pool, so a device copy of
// KvCache can be read in place. Page p holds page_size consecutive slots of
// one sequence; slot s of a sequence lives in page page_table[seq][s /
// page_size] at row s % page_size:
//   k, v: (n_pages, page_size, n_kv_heads * head_dim) f32
// (KvCache's (n_layers, n_pages, page_size, kv_dim) at one layer). v may
// equal k (Multi-head Latent Attention: one latent row is key and value).
//
// The query of sequence `seq` is at its last slot, seq_lens[seq] - 1, whose
// K/V are already written; it sees slots 0 .. seq_lens[seq] - 1. GQA: query
// head h reads KV head h / (n_heads / n_kv_heads). Scale 1/sqrt(head_dim), as
// kernels/ops.h Attention (MLA pre-scales its queries to fit). Softmax in f32
// with the running maximum subtracted. A sequence with length 0 gets zeros,
// as on the CPU.
//
// One thread block per (query head, sequence), kAttnWarps warps: warp w takes
// slots w, w + kAttnWarps, ... with an online softmax (running max, sum and
// f32 accumulator row in shared memory), then the warps' partial results are
// merged in warp order. The order is fixed, so results do not depend on
// anything but the inputs.
//
// Device-side values the host cannot check: seq_lens[seq] is clamped to
// [0, max_pages_per_seq * page_size]; a page id outside [0, n_pages) in the
// used part of a page table makes that sequence's output NaN (never an
// out-of-bounds read), so the caller's bug is visible in the logits check.
//
// A tuned version would: let one block serve all n_heads / n_kv_heads query
// heads of a KV head (K/V read once per group instead of once per query
// head), load K/V rows as float4, split long contexts over several blocks
// with a second merge pass (flash-decoding), and store K/V in bf16 or fp8.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace specd::cuda {

// One layer of the paged KV cache in device memory.
struct PagedKvF32 {
  const float* k = nullptr;  // (n_pages, page_size, n_kv_heads * head_dim)
  const float* v = nullptr;  // same shape; may equal k
  int n_pages = 0;
  int page_size = 0;
};

// Largest head_dim the kernel takes (its shared memory is sized by it); MLA's
// latent rows (512 + 64) fit.
constexpr int kPagedAttentionMaxHeadDim = 1024;
// Most sequences per call (the grid's y dimension).
constexpr int kPagedAttentionMaxSeqs = 65535;

// out[seq, h] = softmax_s(q[seq, h] · K[seq, s, h / group] / sqrt(head_dim)) · V[seq, s, ...].
// Device: q, out (n_seqs, n_heads, head_dim) f32; page_table (n_seqs,
// max_pages_per_seq) int32 page ids; seq_lens (n_seqs) int32; kv as above.
// REQUIRES: 0 <= n_seqs <= kPagedAttentionMaxSeqs; n_heads, n_kv_heads > 0,
// n_heads % n_kv_heads == 0; 0 < head_dim <= kPagedAttentionMaxHeadDim;
// kv.n_pages, kv.page_size, max_pages_per_seq > 0. Violations, and null
// pointers when n_seqs > 0, return kInvalidArgument before any CUDA call.
// n_seqs == 0 does nothing.
Status PagedDecodeAttentionF32(const float* q, int n_seqs, const PagedKvF32& kv,
                               const int32_t* page_table, int max_pages_per_seq,
                               const int32_t* seq_lens, int n_heads, int n_kv_heads, int head_dim,
                               float* out);

}  // namespace specd::cuda
