#include "kernels/cpu/reference.h"

#include <algorithm>
#include <cmath>

namespace specd::kernels::ref {

void MatMulRows(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int n_tokens, float* y) {
  const int64_t k = w.cols();
  const int64_t n_out = row_end - row_begin;
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = row_begin; r < row_end; ++r) {
    DequantizeRow(w.dtype, w.row(r), row.data(), k);
    for (int t = 0; t < n_tokens; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(row[i]) * x[t * k + i];
      y[t * n_out + (r - row_begin)] = static_cast<float>(acc);
    }
  }
}

void MatMul(const TensorView& w, const float* x, int n_tokens, float* y) {
  MatMulRows(w, 0, w.rows(), x, n_tokens, y);
}

void QuantizeActivationsQ8(const float* x, int64_t n, int8_t* qs, float* d) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.f;
    for (int i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    float db = amax / 127.f;
    float id = db != 0.f ? 1.f / db : 0.f;
    d[b] = db;
    for (int i = 0; i < kQuantBlock; ++i) {
      // nearbyint rounds half to even under the default rounding mode, as
      // the SIMD conversion does.
      qs[b * kQuantBlock + i] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
    }
  }
}

void MatMulQuantizedActs(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                         int n_tokens, float* y) {
  const int64_t k = w.cols();
  const int64_t nb = k / kQuantBlock;
  const int64_t n_out = row_end - row_begin;
  std::vector<int8_t> aq(static_cast<size_t>(n_tokens * k));
  std::vector<float> ad(static_cast<size_t>(n_tokens * nb));
  for (int t = 0; t < n_tokens; ++t) {
    QuantizeActivationsQ8(x + t * k, k, aq.data() + t * k, ad.data() + t * nb);
  }
  std::vector<int> wq(kQuantBlock);
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int t = 0; t < n_tokens; ++t) {
      double acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        float dw;
        if (w.dtype == DType::kQ8_0) {
          auto* blk = reinterpret_cast<const BlockQ8_0*>(w.row(r)) + b;
          dw = F16ToF32(blk->d);
          for (int i = 0; i < kQuantBlock; ++i) wq[i] = blk->qs[i];
        } else {
          auto* blk = reinterpret_cast<const BlockQ4_0*>(w.row(r)) + b;
          dw = F16ToF32(blk->d);
          for (int i = 0; i < kQuantBlock / 2; ++i) {
            wq[i] = (blk->qs[i] & 0xF) - 8;
            wq[i + 16] = (blk->qs[i] >> 4) - 8;
          }
        }
        int64_t idot = 0;
        const int8_t* a = aq.data() + t * k + b * kQuantBlock;
        for (int i = 0; i < kQuantBlock; ++i) idot += wq[i] * a[i];
        acc += static_cast<double>(dw) * ad[t * nb + b] * static_cast<double>(idot);
      }
      y[t * n_out + (r - row_begin)] = static_cast<float>(acc);
    }
  }
}

namespace {

// Weight quants of block b of row r as integers, and the block's scale.
float WeightBlock(const TensorView& w, int64_t r, int64_t b, int* wq) {
  if (w.dtype == DType::kQ8_0) {
    auto* blk = reinterpret_cast<const BlockQ8_0*>(w.row(r)) + b;
    for (int i = 0; i < kQuantBlock; ++i) wq[i] = blk->qs[i];
    return F16ToF32(blk->d);
  }
  auto* blk = reinterpret_cast<const BlockQ4_0*>(w.row(r)) + b;
  for (int i = 0; i < kQuantBlock / 2; ++i) {
    wq[i] = (blk->qs[i] & 0xF) - 8;
    wq[i + 16] = (blk->qs[i] >> 4) - 8;
  }
  return F16ToF32(blk->d);
}

}  // namespace

void MatMulQuantizedActsInOrder(const TensorView& w, int64_t row_begin, int64_t row_end,
                                const float* x, int n_tokens, float* y) {
  const int64_t k = w.cols();
  const int64_t nb = k / kQuantBlock;
  const int64_t n_out = row_end - row_begin;
  std::vector<int8_t> aq(static_cast<size_t>(n_tokens * k));
  std::vector<float> ad(static_cast<size_t>(n_tokens * nb));
  for (int t = 0; t < n_tokens; ++t) {
    QuantizeActivationsQ8(x + t * k, k, aq.data() + t * k, ad.data() + t * nb);
  }
  int wq[kQuantBlock];
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int t = 0; t < n_tokens; ++t) {
      float lane[2] = {};
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = WeightBlock(w, r, b, wq);
        int32_t idot = 0;
        const int8_t* a = aq.data() + t * k + b * kQuantBlock;
        for (int i = 0; i < kQuantBlock; ++i) idot += wq[i] * a[i];
        const float c = dw * ad[t * nb + b];
        lane[b % 2] = std::fma(static_cast<float>(idot), c, lane[b % 2]);
      }
      y[t * n_out + (r - row_begin)] = lane[0] + lane[1];
    }
  }
}

void RmsNorm(const float* x, const float* w, int n_tokens, int dim, float eps, float* out) {
  for (int t = 0; t < n_tokens; ++t) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[t * dim + i]) * x[t * dim + i];
    double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) {
      out[t * dim + i] = static_cast<float>(x[t * dim + i] * scale * w[i]);
    }
  }
}

void Rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
          const float* inv_freq, bool interleaved) {
  const int half = head_dim / 2;
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        double angle = static_cast<double>(pos[t]) * inv_freq[i];
        double c = std::cos(angle), s = std::sin(angle);
        int i0 = interleaved ? 2 * i : i;
        int i1 = interleaved ? 2 * i + 1 : i + half;
        double a = v[i0], b = v[i1];
        v[i0] = static_cast<float>(a * c - b * s);
        v[i1] = static_cast<float>(a * s + b * c);
      }
    }
  }
}

void SwiGLU(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::fmax(mx, static_cast<double>(x[i]));
  double sum = 0;
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sum += e[i] = std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[i] / sum);
}

int64_t Argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void Attention(const float* q, int n_q, int n_ctx, const KvPages& kv, const uint8_t* mask,
               int n_heads, int n_kv_heads, int head_dim, float* out) {
  const int group = n_heads / n_kv_heads;
  const int64_t kv_stride = static_cast<int64_t>(n_kv_heads) * head_dim;
  const int first_q_slot = n_ctx - n_q;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> scores(static_cast<size_t>(n_ctx));
  std::vector<double> acc(static_cast<size_t>(head_dim));
  for (int t = 0; t < n_q; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;
      const float* qv = q + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      double mx = -INFINITY;
      for (int s = 0; s < n_ctx; ++s) {
        bool visible;
        if (s < first_q_slot) {
          visible = true;
        } else if (mask == nullptr) {
          visible = s <= first_q_slot + t;
        } else {
          visible = mask[static_cast<int64_t>(t) * n_q + (s - first_q_slot)] != 0;
        }
        if (!visible) {
          scores[s] = -INFINITY;
          continue;
        }
        const float* kvec = kv.k_pages[s / kv.page_size] +
                            static_cast<int64_t>(s % kv.page_size) * kv_stride + kvh * head_dim;
        double dot = 0;
        for (int i = 0; i < head_dim; ++i) dot += static_cast<double>(qv[i]) * kvec[i];
        scores[s] = dot * scale;
        mx = std::fmax(mx, scores[s]);
      }
      double sum = 0;
      for (int s = 0; s < n_ctx; ++s) {
        scores[s] = scores[s] == -INFINITY ? 0.0 : std::exp(scores[s] - mx);
        sum += scores[s];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int s = 0; s < n_ctx; ++s) {
        if (scores[s] == 0.0) continue;
        const float* vvec = kv.v_pages[s / kv.page_size] +
                            static_cast<int64_t>(s % kv.page_size) * kv_stride + kvh * head_dim;
        for (int i = 0; i < head_dim; ++i) acc[i] += scores[s] * vvec[i];
      }
      float* o = out + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      for (int i = 0; i < head_dim; ++i) o[i] = sum > 0 ? static_cast<float>(acc[i] / sum) : 0.f;
    }
  }
}

}  // namespace specd::kernels::ref
