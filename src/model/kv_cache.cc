#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace specd {

KvCache::KvCache(int n_layers, int k_dim, int v_dim, int page_size, int n_pages)
    : n_layers_(n_layers), kv_dim_(k_dim), v_dim_(v_dim), page_size_(page_size),
      n_pages_(n_pages) {
  size_t slots = static_cast<size_t>(n_layers) * n_pages * page_size;
  // calloc of a large block maps fresh zero pages without writing them.
  auto alloc = [](size_t n) {
    float* p = static_cast<float*>(std::calloc(std::max<size_t>(n, 1), sizeof(float)));
    if (p == nullptr) throw std::bad_alloc();  // as the std::vector it replaces
    return p;
  };
  k_.reset(alloc(slots * k_dim));
  if (v_dim > 0) v_.reset(alloc(slots * v_dim));
  free_.reserve(n_pages);
  for (int p = n_pages - 1; p >= 0; --p) free_.push_back(p);
}

int KvCache::NewSequence() {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].live) {
      seqs_[i] = Seq();
      seqs_[i].live = true;
      return static_cast<int>(i);
    }
  }
  seqs_.emplace_back();
  seqs_.back().live = true;
  return static_cast<int>(seqs_.size() - 1);
}

void KvCache::FreeSequence(int seq) {
  Seq& s = seqs_[seq];
  // Last page first, so the next sequence pops them in ascending address
  // order: attention then walks a reused sequence's K/V forwards through
  // memory, as it does a fresh one's (descending pages made every decode step
  // of the demo model after the first request about 10 % slower).
  for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it) free_.push_back(*it);
  s = Seq();
}

bool KvCache::IsLive(int seq) const {
  return seq >= 0 && seq < static_cast<int>(seqs_.size()) && seqs_[seq].live;
}

float* KvCache::PageBase(bool v, int layer, int page) {
  size_t slot = (static_cast<size_t>(layer) * n_pages_ + page) * page_size_;
  if (v && v_dim_ > 0) return v_.get() + slot * v_dim_;
  return k_.get() + slot * kv_dim_;
}

void KvCache::RebuildPointers(Seq& s) {
  s.k_ptrs.assign(n_layers_, {});
  s.v_ptrs.assign(n_layers_, {});
  for (int l = 0; l < n_layers_; ++l) {
    for (int p : s.pages) {
      s.k_ptrs[l].push_back(PageBase(false, l, p));
      s.v_ptrs[l].push_back(PageBase(true, l, p));
    }
  }
}

Status KvCache::Reserve(int seq, int n) {
  Seq& s = seqs_[seq];
  int need = (s.length + n + page_size_ - 1) / page_size_;
  int extra = need - static_cast<int>(s.pages.size());
  if (extra <= 0) return Status::Ok();
  if (extra > free_pages()) {
    return ResourceExhaustedError("KV cache full: sequence needs " + std::to_string(extra) +
                                  " more pages of " + std::to_string(page_size_) +
                                  " tokens, " + std::to_string(free_pages()) + " of " +
                                  std::to_string(n_pages_) + " free");
  }
  for (int i = 0; i < extra; ++i) {
    s.pages.push_back(free_.back());
    free_.pop_back();
  }
  RebuildPointers(s);
  return Status::Ok();
}

void KvCache::Truncate(int seq, int new_length) {
  Seq& s = seqs_[seq];
  s.length = std::min(s.length, new_length);
  size_t keep = static_cast<size_t>((new_length + page_size_ - 1) / page_size_);
  if (s.pages.size() > keep) {
    while (s.pages.size() > keep) {
      free_.push_back(s.pages.back());
      s.pages.pop_back();
    }
    RebuildPointers(s);
  }
}

float* KvCache::K(int layer, int seq, int slot) {
  const Seq& s = seqs_[seq];
  return s.k_ptrs[layer][slot / page_size_] + static_cast<size_t>(slot % page_size_) * kv_dim_;
}

float* KvCache::V(int layer, int seq, int slot) {
  const Seq& s = seqs_[seq];
  if (v_dim_ == 0) return K(layer, seq, slot);
  return s.v_ptrs[layer][slot / page_size_] + static_cast<size_t>(slot % page_size_) * v_dim_;
}

void KvCache::MoveSlot(int seq, int src, int dst) {
  if (src == dst) return;
  for (int l = 0; l < n_layers_; ++l) {
    std::memcpy(K(l, seq, dst), K(l, seq, src), sizeof(float) * kv_dim_);
    if (v_dim_ > 0) std::memcpy(V(l, seq, dst), V(l, seq, src), sizeof(float) * v_dim_);
  }
}

kernels::KvPages KvCache::Pages(int layer, int seq) {
  Seq& s = seqs_[seq];
  return kernels::KvPages{s.k_ptrs[layer].data(), s.v_ptrs[layer].data(), page_size_};
}

}  // namespace specd
