// Paged decode attention (paged_attention.h).
#include <cmath>
#include <cstdint>
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/paged_attention.h"
#include "cuda/reduce.cuh"

namespace specd::cuda {
namespace {

constexpr int kAttnWarps = 4;

// Shared memory: q row (head_dim), one accumulator row per warp
// (kAttnWarps, head_dim), then per warp its running max, sum and a bad-page
// flag.
size_t AttnSharedBytes(int head_dim) {
  return sizeof(float) * (static_cast<size_t>(head_dim) * (1 + kAttnWarps) + 3 * kAttnWarps);
}

// Grid: (n_heads, n_seqs) blocks of kAttnWarps warps.
__global__ void PagedDecodeAttentionKernel(const float* q, const float* k_cache,
                                           const float* v_cache, int n_pages, int page_size,
                                           const int32_t* page_table, int max_pages_per_seq,
                                           const int32_t* seq_lens, int n_heads, int n_kv_heads,
                                           int head_dim, float scale, float* out) {
  extern __shared__ float smem[];
  float* q_row = smem;                                 // (head_dim)
  float* acc_rows = smem + head_dim;                   // (kAttnWarps, head_dim)
  float* warp_max = acc_rows + kAttnWarps * head_dim;  // (kAttnWarps)
  float* warp_sum = warp_max + kAttnWarps;             // (kAttnWarps)
  float* warp_bad = warp_sum + kAttnWarps;             // (kAttnWarps), 0 or 1

  const int h = blockIdx.x;
  const int seq = blockIdx.y;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int kv_h = h / (n_heads / n_kv_heads);
  const size_t kv_dim = static_cast<size_t>(n_kv_heads) * head_dim;
  const size_t qo = (static_cast<size_t>(seq) * n_heads + h) * head_dim;

  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) q_row[d] = q[qo + d];
  float* acc = acc_rows + static_cast<size_t>(warp) * head_dim;
  for (int d = lane; d < head_dim; d += kWarpSize) acc[d] = 0.0f;
  __syncthreads();

  const int capacity = max_pages_per_seq * page_size;
  const int len = min(max(seq_lens[seq], 0), capacity);
  const int32_t* pages = page_table + static_cast<size_t>(seq) * max_pages_per_seq;
  // Online softmax over this warp's slots. m, l and every score are the same
  // in all lanes (a butterfly sum gives each lane the same value).
  float m = -INFINITY, l = 0.0f;
  bool bad = false;
  for (int s = warp; s < len; s += kAttnWarps) {
    const int page = pages[s / page_size];
    if (page < 0 || page >= n_pages) {
      bad = true;
      continue;
    }
    const size_t row = (static_cast<size_t>(page) * page_size + s % page_size) * kv_dim +
                       static_cast<size_t>(kv_h) * head_dim;
    const float* k = k_cache + row;
    const float* v = v_cache + row;
    float dot = 0.0f;
    for (int d = lane; d < head_dim; d += kWarpSize) dot += q_row[d] * k[d];
    const float score = WarpSum(dot) * scale;
    const float m_new = fmaxf(m, score);
    const float rescale = m == -INFINITY ? 0.0f : expf(m - m_new);  // old terms, new max
    const float p = expf(score - m_new);
    l = l * rescale + p;
    for (int d = lane; d < head_dim; d += kWarpSize) acc[d] = acc[d] * rescale + p * v[d];
    m = m_new;
  }
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum[warp] = l;
    warp_bad[warp] = bad ? 1.0f : 0.0f;
  }
  __syncthreads();

  // Merge, in warp order: out = sum_w e^(m_w - M) acc_w / sum_w e^(m_w - M) l_w.
  float big = -INFINITY;
  bool any_bad = false;
  for (int w = 0; w < kAttnWarps; ++w) {
    if (warp_sum[w] > 0.0f) big = fmaxf(big, warp_max[w]);
    any_bad = any_bad || warp_bad[w] != 0.0f;
  }
  float weight[kAttnWarps];
  float denom = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) {
    weight[w] = warp_sum[w] > 0.0f ? expf(warp_max[w] - big) : 0.0f;
    denom += weight[w] * warp_sum[w];
  }
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float num = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) num += weight[w] * acc_rows[w * head_dim + d];
    float o = denom > 0.0f ? num / denom : 0.0f;
    if (any_bad) o = NAN;
    out[qo + d] = o;
  }
}

}  // namespace

Status PagedDecodeAttentionF32(const float* q, int n_seqs, const PagedKvF32& kv,
                               const int32_t* page_table, int max_pages_per_seq,
                               const int32_t* seq_lens, int n_heads, int n_kv_heads, int head_dim,
                               float* out) {
  const bool shape_ok = n_seqs >= 0 && n_seqs <= kPagedAttentionMaxSeqs && n_heads > 0 &&
                        n_kv_heads > 0 && n_heads % n_kv_heads == 0 && head_dim > 0 &&
                        head_dim <= kPagedAttentionMaxHeadDim && kv.n_pages > 0 &&
                        kv.page_size > 0 && max_pages_per_seq > 0 &&
                        static_cast<int64_t>(max_pages_per_seq) * kv.page_size <= INT32_MAX;
  if (!shape_ok) {
    return InvalidArgumentError(
        "PagedDecodeAttentionF32: n_seqs " + std::to_string(n_seqs) + ", n_heads " +
        std::to_string(n_heads) + ", n_kv_heads " + std::to_string(n_kv_heads) + ", head_dim " +
        std::to_string(head_dim) + ", n_pages " + std::to_string(kv.n_pages) + ", page_size " +
        std::to_string(kv.page_size) + ", max_pages_per_seq " + std::to_string(max_pages_per_seq) +
        " (need 0 <= n_seqs <= " + std::to_string(kPagedAttentionMaxSeqs) +
        ", n_heads a positive multiple of n_kv_heads, 0 < head_dim <= " +
        std::to_string(kPagedAttentionMaxHeadDim) +
        ", positive n_pages, page_size and max_pages_per_seq, and max_pages_per_seq * "
        "page_size < 2^31)");
  }
  if (n_seqs == 0) return Status::Ok();
  if (q == nullptr || kv.k == nullptr || kv.v == nullptr || page_table == nullptr ||
      seq_lens == nullptr || out == nullptr) {
    return InvalidArgumentError(
        "PagedDecodeAttentionF32: null device pointer (q, kv.k, kv.v, page_table, seq_lens or "
        "out)");
  }
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_seqs));
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  PagedDecodeAttentionKernel<<<grid, kAttnWarps * kWarpSize, AttnSharedBytes(head_dim)>>>(
      q, kv.k, kv.v, kv.n_pages, kv.page_size, page_table, max_pages_per_seq, seq_lens, n_heads,
      n_kv_heads, head_dim, scale, out);
  return CudaStatus(cudaGetLastError(), "PagedDecodeAttentionF32 launch");
}

}  // namespace specd::cuda
