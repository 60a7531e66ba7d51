// Paged KV cache shared by all sequences on one rank.
//
// Invariants:
//  - Memory is a pool of `n_pages` pages per layer; page p of layer l holds K
//    and V for page_size consecutive slots of one sequence, each slot
//    k_dim (Llama: n_kv_heads_local · head_dim) and v_dim f32. A page id means
//    the same page in every layer, so a sequence has one page table for all
//    layers.
//  - v_dim == 0 (Multi-head Latent Attention): a slot holds one latent row of
//    k_dim values that serves as both key and value; V() and the value pages
//    alias K's.
//  - A sequence's slots 0..length-1 are filled, in order; its page table has
//    ceil(capacity / page_size) pages, capacity >= length.
//  - Pages are owned by exactly one sequence or by the free list.
//  - Memory is committed as pages are first written (the pool is zeroed
//    anonymous memory, never touched up front), so a large cache costs
//    resident memory only for the slots sequences have used.
// Not thread-safe: the engine loop owns it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/status.h"
#include "kernels/ops.h"

namespace specd {

class KvCache {
 public:
  // (n_layers, n_pages, page_size, kv_dim) for K and the same for V.
  KvCache(int n_layers, int kv_dim, int page_size, int n_pages)
      : KvCache(n_layers, kv_dim, kv_dim, page_size, n_pages) {}
  // K slots of k_dim floats, V slots of v_dim (0: V aliases K).
  KvCache(int n_layers, int k_dim, int v_dim, int page_size, int n_pages);

  int page_size() const { return page_size_; }
  int kv_dim() const { return kv_dim_; }  // K slot width
  int v_dim() const { return v_dim_; }    // 0: V aliases K
  // Bytes one token occupies across all layers.
  size_t bytes_per_token() const {
    return sizeof(float) * static_cast<size_t>(n_layers_) * (kv_dim_ + v_dim_);
  }
  int n_pages() const { return n_pages_; }
  int free_pages() const { return static_cast<int>(free_.size()); }
  int used_pages() const { return n_pages_ - free_pages(); }

  // Returns a new empty sequence id.
  int NewSequence();
  // Frees every page of `seq`; the id may be reused.
  void FreeSequence(int seq);
  bool IsLive(int seq) const;
  int Length(int seq) const { return seqs_[seq].length; }

  // Makes room for n more slots after the current length (allocating pages).
  // ResourceExhausted if the pool runs out; then nothing is allocated.
  Status Reserve(int seq, int n);
  // Marks n more slots as filled. REQUIRES: Reserve(seq, n) succeeded.
  void Advance(int seq, int n) { seqs_[seq].length += n; }
  // Drops slots >= new_length and frees pages no longer needed.
  void Truncate(int seq, int new_length);
  // Moves the K/V of slot src to slot dst in every layer (dst < src), used to
  // commit an accepted path of a draft tree.
  void MoveSlot(int seq, int src, int dst);

  // Pointers to the K and V row of `slot` in `layer` (kv_dim floats each).
  float* K(int layer, int seq, int slot);
  float* V(int layer, int seq, int slot);
  // Page pointer arrays for the attention kernel; valid until the next
  // Reserve/Truncate/FreeSequence of this sequence.
  kernels::KvPages Pages(int layer, int seq);

 private:
  struct Seq {
    bool live = false;
    int length = 0;
    std::vector<int> pages;
    // Per layer: page base pointers (k then v) in page-table order.
    std::vector<std::vector<float*>> k_ptrs, v_ptrs;
  };
  float* PageBase(bool v, int layer, int page);
  void RebuildPointers(Seq& s);

  int n_layers_, kv_dim_, v_dim_, page_size_, n_pages_;
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], FreeDeleter> k_;  // (n_layers, n_pages, page_size, kv_dim)
  std::unique_ptr<float[], FreeDeleter> v_;  // (n_layers, n_pages, page_size, v_dim); null when V aliases K
  std::vector<int> free_;
  std::vector<Seq> seqs_;
};

}  // namespace specd
