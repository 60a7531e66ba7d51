// PagedDecodeAttentionF32 against a naive double-precision softmax over each
// sequence's slots, read through the same page table from a pool laid out as
// one layer of model/kv_cache.h: (n_pages, page_size, n_kv_heads * head_dim).
#include "cuda/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"

namespace specd::cuda {
namespace {

struct Case {
  const char* name;
  int n_heads, n_kv_heads, head_dim, page_size, n_pages, max_pages_per_seq;
  std::vector<int32_t> seq_lens;
  bool v_is_k;  // MLA: one latent row serves as key and value
};

// Host copy of the inputs: pool, page tables (distinct pages per sequence,
// shuffled), queries.
struct Inputs {
  std::vector<float> k, v;          // (n_pages, page_size, kv_dim)
  std::vector<int32_t> page_table;  // (n_seqs, max_pages_per_seq); -1 past a sequence's pages
  std::vector<float> q;             // (n_seqs, n_heads, head_dim)
};

Inputs MakeInputs(const Case& c, uint32_t seed) {
  const int n_seqs = static_cast<int>(c.seq_lens.size());
  const size_t kv_dim = size_t(c.n_kv_heads) * c.head_dim;
  Inputs in;
  // Scores of a few units: the softmax is neither flat nor one-hot.
  in.k = RandomVector(size_t(c.n_pages) * c.page_size * kv_dim, seed, -2.0f, 2.0f);
  in.v = c.v_is_k ? in.k : RandomVector(in.k.size(), seed + 1);
  in.q = RandomVector(size_t(n_seqs) * c.n_heads * c.head_dim, seed + 2, -2.0f, 2.0f);
  std::vector<int32_t> free_pages(c.n_pages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), std::mt19937(seed + 3));
  in.page_table.assign(size_t(n_seqs) * c.max_pages_per_seq, -1);
  size_t next = 0;
  for (int s = 0; s < n_seqs; ++s) {
    const int n = (c.seq_lens[s] + c.page_size - 1) / c.page_size;
    EXPECT_LE(n, c.max_pages_per_seq) << c.name;
    for (int p = 0; p < n; ++p)
      in.page_table[size_t(s) * c.max_pages_per_seq + p] = free_pages.at(next++);
  }
  return in;
}

// (n_seqs, n_heads, head_dim) in double.
std::vector<double> Reference(const Case& c, const Inputs& in) {
  const int n_seqs = static_cast<int>(c.seq_lens.size());
  const size_t kv_dim = size_t(c.n_kv_heads) * c.head_dim;
  const int group = c.n_heads / c.n_kv_heads;
  std::vector<double> out(size_t(n_seqs) * c.n_heads * c.head_dim, 0.0);
  for (int s = 0; s < n_seqs; ++s) {
    const int len = c.seq_lens[s];
    for (int h = 0; h < c.n_heads; ++h) {
      const float* q = &in.q[(size_t(s) * c.n_heads + h) * c.head_dim];
      std::vector<double> scores(len);
      std::vector<size_t> rows(len);
      double mx = -INFINITY;
      for (int slot = 0; slot < len; ++slot) {
        const int page = in.page_table[size_t(s) * c.max_pages_per_seq + slot / c.page_size];
        rows[slot] = (size_t(page) * c.page_size + slot % c.page_size) * kv_dim +
                     size_t(h / group) * c.head_dim;
        double dot = 0;
        for (int d = 0; d < c.head_dim; ++d) dot += double(q[d]) * in.k[rows[slot] + d];
        scores[slot] = dot / std::sqrt(double(c.head_dim));
        mx = std::max(mx, scores[slot]);
      }
      double sum = 0;
      for (double& x : scores) sum += (x = std::exp(x - mx));
      double* o = &out[(size_t(s) * c.n_heads + h) * c.head_dim];
      for (int slot = 0; slot < len; ++slot) {
        for (int d = 0; d < c.head_dim; ++d) o[d] += scores[slot] / sum * in.v[rows[slot] + d];
      }
    }
  }
  return out;
}

struct DeviceInputs {
  std::unique_ptr<DeviceBuffer> k, v, page_table, seq_lens, q, out;
};

DeviceInputs UploadInputs(const Case& c, const Inputs& in) {
  DeviceInputs d;
  d.k = Upload(in.k);
  d.v = c.v_is_k ? nullptr : Upload(in.v);
  d.page_table = Upload(in.page_table);
  d.seq_lens = Upload(c.seq_lens);
  d.q = Upload(in.q);
  auto out = NewDeviceBuffer(in.q.size() * 4);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (out.ok()) d.out = std::move(out).value();
  return d;
}

Status RunAttention(const Case& c, const DeviceInputs& d) {
  PagedKvF32 kv;
  kv.k = d.k->as<float>();
  kv.v = c.v_is_k ? kv.k : d.v->as<float>();
  kv.n_pages = c.n_pages;
  kv.page_size = c.page_size;
  return PagedDecodeAttentionF32(d.q->as<float>(), static_cast<int>(c.seq_lens.size()), kv,
                                 d.page_table->as<int32_t>(), c.max_pages_per_seq,
                                 d.seq_lens->as<int32_t>(), c.n_heads, c.n_kv_heads, c.head_dim,
                                 d.out->as<float>());
}

TEST_F(CudaKernelTest, PagedDecodeAttentionMatchesScalarReference) {
  const Case cases[] = {
      // Lengths: one slot, a full page, a page and one, several pages, empty.
      {"gqa 8/2 x 64", 8, 2, 64, 16, 64, 13, {1, 16, 17, 100, 0, 200}, false},
      {"mha 4/4 x 128", 4, 4, 128, 32, 16, 4, {128, 5, 33}, false},
      {"gqa 6/3 x 40", 6, 3, 40, 7, 40, 10, {70, 3, 49, 22}, false},
      {"mla latent 16/1 x 576", 16, 1, 576, 64, 12, 6, {300, 64, 1}, true},
  };
  for (const Case& c : cases) {
    const Inputs in = MakeInputs(c, 51);
    const std::vector<double> ref = Reference(c, in);
    DeviceInputs d = UploadInputs(c, in);
    ASSERT_TRUE(d.k && (c.v_is_k || d.v) && d.page_table && d.seq_lens && d.q && d.out);
    const Status st = RunAttention(c, d);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const std::vector<float> out = Download<float>(*d.out, in.q.size());
    double maxdiff = 0;
    for (size_t i = 0; i < out.size(); ++i) maxdiff = std::max(maxdiff, std::fabs(out[i] - ref[i]));
    std::printf("paged attention %s maxdiff %.3g\n", c.name, maxdiff);
    EXPECT_LT(maxdiff, 2e-5) << c.name;
  }
}

TEST_F(CudaKernelTest, PagedDecodeAttentionBadPageIdGivesNaN) {
  Case c{"bad page", 4, 2, 32, 8, 8, 4, {20, 20}, false};
  Inputs in = MakeInputs(c, 61);
  in.page_table[1 * c.max_pages_per_seq + 1] = c.n_pages;  // sequence 1's second page
  DeviceInputs d = UploadInputs(c, in);
  ASSERT_TRUE(d.k && d.v && d.page_table && d.seq_lens && d.q && d.out);
  ASSERT_TRUE(RunAttention(c, d).ok());
  const std::vector<float> out = Download<float>(*d.out, in.q.size());
  const size_t per_seq = size_t(c.n_heads) * c.head_dim;
  for (size_t i = 0; i < per_seq; ++i) ASSERT_FALSE(std::isnan(out[i])) << "sequence 0, " << i;
  for (size_t i = per_seq; i < 2 * per_seq; ++i)
    ASSERT_TRUE(std::isnan(out[i])) << "sequence 1, " << i;
}

TEST(CudaPagedAttentionErrorTest, BadShapesAreRefusedBeforeAnyCudaCall) {
  const StatusCode want = ExpectedShapeError();
  const auto* q = reinterpret_cast<const float*>(uintptr_t{0x10000});
  const auto* pt = reinterpret_cast<const int32_t*>(uintptr_t{0x20000});
  const auto* lens = reinterpret_cast<const int32_t*>(uintptr_t{0x30000});
  auto* out = reinterpret_cast<float*>(uintptr_t{0x40000});
  PagedKvF32 kv;
  kv.k = kv.v = reinterpret_cast<const float*>(uintptr_t{0x50000});
  kv.n_pages = 8;
  kv.page_size = 16;
  auto call = [&](int n_seqs, const PagedKvF32& cache, int max_pages, int n_heads, int n_kv_heads,
                  int head_dim) {
    return PagedDecodeAttentionF32(q, n_seqs, cache, pt, max_pages, lens, n_heads, n_kv_heads,
                                   head_dim, out);
  };
  const Status not_multiple = call(2, kv, 4, 6, 4, 64);
  EXPECT_EQ(not_multiple.code(), want);
  if (BuiltWithCuda()) {
    EXPECT_NE(not_multiple.message().find("n_heads 6, n_kv_heads 4"), std::string::npos)
        << not_multiple.ToString();
  }
  EXPECT_EQ(call(-1, kv, 4, 8, 2, 64).code(), want);
  EXPECT_EQ(call(kPagedAttentionMaxSeqs + 1, kv, 4, 8, 2, 64).code(), want);
  EXPECT_EQ(call(2, kv, 4, 8, 0, 64).code(), want);
  EXPECT_EQ(call(2, kv, 4, 8, 2, 0).code(), want);
  EXPECT_EQ(call(2, kv, 4, 8, 2, kPagedAttentionMaxHeadDim + 1).code(), want);
  EXPECT_EQ(call(2, kv, 0, 8, 2, 64).code(), want);
  EXPECT_EQ(call(2, kv, 1 << 30, 8, 2, 64).code(), want);  // capacity past 2^31 slots
  PagedKvF32 no_pages = kv;
  no_pages.n_pages = 0;
  EXPECT_EQ(call(2, no_pages, 4, 8, 2, 64).code(), want);
  PagedKvF32 no_page_size = kv;
  no_page_size.page_size = 0;
  EXPECT_EQ(call(2, no_page_size, 4, 8, 2, 64).code(), want);
  PagedKvF32 no_v = kv;
  no_v.v = nullptr;
  EXPECT_EQ(call(2, no_v, 4, 8, 2, 64).code(), want);
  EXPECT_EQ(PagedDecodeAttentionF32(q, 2, kv, nullptr, 4, lens, 8, 2, 64, out).code(), want);
  EXPECT_EQ(PagedDecodeAttentionF32(q, 2, kv, pt, 4, nullptr, 8, 2, 64, out).code(), want);
  EXPECT_EQ(PagedDecodeAttentionF32(nullptr, 2, kv, pt, 4, lens, 8, 2, 64, out).code(), want);
  EXPECT_EQ(PagedDecodeAttentionF32(q, 2, kv, pt, 4, lens, 8, 2, 64, nullptr).code(), want);
  if (BuiltWithCuda()) {
    EXPECT_TRUE(
        PagedDecodeAttentionF32(nullptr, 0, kv, nullptr, 4, nullptr, 8, 2, 64, nullptr).ok());
  }
}

}  // namespace
}  // namespace specd::cuda
