// Paged attention against the scalar reference: causal and tree masks, GQA,
// page sizes that do not divide n_ctx, with and without a thread pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/kernel_paths_test_util.h"
#include "kernels/ops.h"

namespace specd::kernels {
namespace {

// A sequence's KV cache split into pages, filled with random K and V.
struct PagedKv {
  std::vector<std::vector<float>> k, v;
  std::vector<float*> k_ptrs, v_ptrs;
  KvPages pages;

  PagedKv(int n_ctx, int page_size, int n_kv_heads, int head_dim, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 1.f);
    const int n_pages = (n_ctx + page_size - 1) / page_size;
    const size_t page_elems = static_cast<size_t>(page_size) * n_kv_heads * head_dim;
    k.resize(n_pages);
    v.resize(n_pages);
    for (int p = 0; p < n_pages; ++p) {
      k[p].resize(page_elems);
      v[p].resize(page_elems);
      for (auto& x : k[p]) x = dist(rng);
      for (auto& x : v[p]) x = dist(rng);
      k_ptrs.push_back(k[p].data());
      v_ptrs.push_back(v[p].data());
    }
    // Shuffle page order so slot -> page mapping is not the identity.
    std::reverse(k_ptrs.begin(), k_ptrs.end());
    std::reverse(v_ptrs.begin(), v_ptrs.end());
    pages = KvPages{k_ptrs.data(), v_ptrs.data(), page_size};
  }
};

struct Shape {
  int n_q, n_ctx, page_size, n_heads, n_kv_heads, head_dim;
};

void Check(const Shape& s, const uint8_t* mask, ThreadPool* pool) {
  SCOPED_TRACE("n_q=" + std::to_string(s.n_q) + " n_ctx=" + std::to_string(s.n_ctx) +
               " page=" + std::to_string(s.page_size) + " heads=" + std::to_string(s.n_heads) +
               "/" + std::to_string(s.n_kv_heads) + " head_dim=" + std::to_string(s.head_dim) +
               (mask ? " tree" : " causal"));
  PagedKv kv(s.n_ctx, s.page_size, s.n_kv_heads, s.head_dim, s.n_ctx * 7 + s.n_q);
  std::mt19937 rng(s.n_q);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> q(static_cast<size_t>(s.n_q) * s.n_heads * s.head_dim);
  for (auto& x : q) x = dist(rng);
  std::vector<float> out(q.size(), -1.f), out_ref(q.size());
  Attention(q.data(), s.n_q, s.n_ctx, kv.pages, mask, s.n_heads, s.n_kv_heads, s.head_dim,
            out.data(), pool);
  ref::Attention(q.data(), s.n_q, s.n_ctx, kv.pages, mask, s.n_heads, s.n_kv_heads, s.head_dim,
                 out_ref.data());
  // Outputs are convex combinations of V entries (|v| ~ 1); f32 scores and
  // accumulation: 2e-5 absolute.
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], out_ref[i], 2e-5) << "i=" << i;
}

TEST(AttentionTest, CausalMatchesReference) {
  ThreadPool pool(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    Check({1, 1, 16, 4, 4, 64}, nullptr, p);      // first token
    Check({1, 37, 16, 8, 2, 64}, nullptr, p);     // decode, GQA 4:1, partial last page
    Check({7, 50, 16, 6, 3, 32}, nullptr, p);     // verify tokens after a prefix
    Check({33, 33, 5, 4, 1, 16}, nullptr, p);     // prefill, MQA, page 5
    Check({16, 100, 7, 32, 8, 128}, nullptr, p);  // llama-1B-like heads
    Check({3, 70, 16, 4, 2, 40}, nullptr, p);     // demo heads: head_dim not a vector multiple
    Check({2, 150, 16, 16, 1, 168}, nullptr, p);  // MQA, 32 query rows, head_dim 10.5 vectors
  }
}

TEST(AttentionTest, TreeMaskMatchesReference) {
  ThreadPool pool(2);
  // A draft tree of 6 nodes: 0 is the root; 1, 2 children of 0; 3 of 1; 4, 5 of 2.
  const int parent[6] = {-1, 0, 0, 1, 2, 2};
  std::vector<uint8_t> mask(36, 0);
  for (int t = 0; t < 6; ++t) {
    for (int a = t; a >= 0; a = parent[a]) mask[t * 6 + a] = 1;
  }
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    Check({6, 6, 4, 4, 2, 32}, mask.data(), p);
    Check({6, 41, 16, 8, 4, 64}, mask.data(), p);
  }
}

TEST(AttentionTest, LowerTriangularMaskEqualsCausal) {
  const Shape s{9, 30, 8, 4, 2, 32};
  std::vector<uint8_t> mask(s.n_q * s.n_q, 0);
  for (int t = 0; t < s.n_q; ++t) {
    for (int j = 0; j <= t; ++j) mask[t * s.n_q + j] = 1;
  }
  PagedKv kv(s.n_ctx, s.page_size, s.n_kv_heads, s.head_dim, 5);
  std::vector<float> q(s.n_q * s.n_heads * s.head_dim, 0.5f);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(static_cast<float>(i));
  std::vector<float> a(q.size()), b(q.size());
  Attention(q.data(), s.n_q, s.n_ctx, kv.pages, nullptr, s.n_heads, s.n_kv_heads, s.head_dim,
            a.data(), nullptr);
  Attention(q.data(), s.n_q, s.n_ctx, kv.pages, mask.data(), s.n_heads, s.n_kv_heads, s.head_dim,
            b.data(), nullptr);
  EXPECT_EQ(a, b);
}

TEST(AttentionTest, SingleVisibleSlotReturnsItsValue) {
  // One query, one slot: softmax weight 1, so out equals V exactly.
  const Shape s{1, 1, 4, 2, 1, 16};
  PagedKv kv(s.n_ctx, s.page_size, s.n_kv_heads, s.head_dim, 9);
  std::vector<float> q(s.n_heads * s.head_dim, 1.f), out(q.size());
  Attention(q.data(), 1, 1, kv.pages, nullptr, s.n_heads, s.n_kv_heads, s.head_dim, out.data(),
            nullptr);
  for (int h = 0; h < s.n_heads; ++h) {
    for (int i = 0; i < s.head_dim; ++i) EXPECT_EQ(out[h * s.head_dim + i], kv.v_ptrs[0][i]);
  }
}

// One query row's output is bitwise the same whether the row is attended
// alone (decode: one query, the cache up to its own slot) or inside a batch of
// queries (prefill, causal verify) at any position, with or without a pool:
// on every kernel path of this CPU (the Highway float target it selects).
void CheckQueryRowAloneEqualsRowInBatch() {
  ThreadPool pool(3);
  const int n_heads = 8, n_kv_heads = 2, page_size = 16;
  for (int head_dim : {64, 40})
  for (int n_ctx : {2, 37, 100, 300}) {
    for (int n_q : {2, 5, 16, 33, 64}) {
      if (n_q > n_ctx) continue;
      SCOPED_TRACE("n_ctx=" + std::to_string(n_ctx) + " n_q=" + std::to_string(n_q) +
                   " head_dim=" + std::to_string(head_dim));
      PagedKv kv(n_ctx, page_size, n_kv_heads, head_dim, n_ctx * 3 + n_q);
      std::mt19937 rng(n_q);
      std::normal_distribution<float> dist(0.f, 2.f);
      const int row = n_heads * head_dim;
      std::vector<float> q(static_cast<size_t>(n_q) * row);
      for (auto& x : q) x = dist(rng);
      std::vector<float> out(q.size()), out1(row);
      Attention(q.data(), n_q, n_ctx, kv.pages, nullptr, n_heads, n_kv_heads, head_dim,
                out.data(), &pool);
      for (int t = 0; t < n_q; ++t) {
        // Alone: the same cache, cut after the query's own slot.
        const int ctx1 = n_ctx - n_q + t + 1;
        Attention(q.data() + t * row, 1, ctx1, kv.pages, nullptr, n_heads, n_kv_heads, head_dim,
                  out1.data(), nullptr);
        for (int i = 0; i < row; ++i) ASSERT_EQ(out[t * row + i], out1[i]) << "t=" << t;
      }
    }
  }
}

TEST(AttentionTest, QueryRowAloneEqualsRowInBatchCausal) {
  ForEachKernelPath(CheckQueryRowAloneEqualsRowInBatch);
}

// A tree-masked verify pass: node i's output equals that of a plain causal
// decode step over the prefix followed by i's ancestors and i itself (the
// sequence node i stands for once accepted); on every kernel path.
void CheckTreeNodeEqualsDecodeOverItsPath() {
  ThreadPool pool(2);
  const int n_heads = 4, n_kv_heads = 2, head_dim = 32, page_size = 8;
  // 0 is the root; 1, 2 children of 0; 3 of 1; 4, 5 of 2; 6 of 3; 7 of 5.
  const int parent[8] = {-1, 0, 0, 1, 2, 2, 3, 5};
  const int n_q = 8;
  std::vector<uint8_t> mask(n_q * n_q, 0);
  for (int t = 0; t < n_q; ++t) {
    for (int a = t; a >= 0; a = parent[a]) mask[t * n_q + a] = 1;
  }
  const int kv_row = n_kv_heads * head_dim;
  const int row = n_heads * head_dim;
  for (int prefix : {0, 1, 29, 200}) {
    SCOPED_TRACE("prefix=" + std::to_string(prefix));
    const int n_ctx = prefix + n_q;
    PagedKv kv(n_ctx, page_size, n_kv_heads, head_dim, prefix + 11);
    std::mt19937 rng(prefix);
    std::normal_distribution<float> dist(0.f, 2.f);
    std::vector<float> q(static_cast<size_t>(n_q) * row);
    for (auto& x : q) x = dist(rng);
    std::vector<float> out(q.size()), out1(row);
    Attention(q.data(), n_q, n_ctx, kv.pages, mask.data(), n_heads, n_kv_heads, head_dim,
              out.data(), &pool);
    auto slot_k = [&](const PagedKv& c, int s) {
      return c.k_ptrs[s / page_size] + (s % page_size) * kv_row;
    };
    auto slot_v = [&](const PagedKv& c, int s) {
      return c.v_ptrs[s / page_size] + (s % page_size) * kv_row;
    };
    for (int t = 0; t < n_q; ++t) {
      std::vector<int> path;
      for (int a = t; a >= 0; a = parent[a]) path.insert(path.begin(), a);
      const int ctx1 = prefix + static_cast<int>(path.size());
      PagedKv seq(ctx1, page_size, n_kv_heads, head_dim, 1);
      for (int s = 0; s < ctx1; ++s) {
        const int src = s < prefix ? s : prefix + path[s - prefix];
        std::copy(slot_k(kv, src), slot_k(kv, src) + kv_row, slot_k(seq, s));
        std::copy(slot_v(kv, src), slot_v(kv, src) + kv_row, slot_v(seq, s));
      }
      Attention(q.data() + t * row, 1, ctx1, seq.pages, nullptr, n_heads, n_kv_heads, head_dim,
                out1.data(), nullptr);
      for (int i = 0; i < row; ++i) ASSERT_EQ(out[t * row + i], out1[i]) << "node " << t;
    }
  }
}

TEST(AttentionTest, TreeNodeEqualsDecodeOverItsPath) {
  ForEachKernelPath(CheckTreeNodeEqualsDecodeOverItsPath);
}

}  // namespace
}  // namespace specd::kernels
