// Highway float kernels (see float_ops.h). This file is compiled once per
// Highway target via foreach_target.h; HWY_DYNAMIC_DISPATCH picks one at run time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/float_ops.h"
#include "tensor/dtype.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/float_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace specd::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Weight element loaders: N weights at w + i, widened to f32.
struct LoadF32 {
  using T = float;
  template <class V>
  static V Load(DF d, const T* w) { return hn::LoadU(d, w); }
  static float Scalar(const T* w) { return *w; }
};
struct LoadF16 {
  using T = hwy::float16_t;
  template <class V>
  static V Load(DF d, const T* w) {
    const hn::Rebind<T, DF> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, w));  // vcvtph2ps on AVX2/AVX3
  }
  static float Scalar(const T* w) {
    uint16_t bits;
    std::memcpy(&bits, w, 2);
    return F16ToF32(bits);
  }
};
struct LoadBF16 {
  using T = hwy::bfloat16_t;
  template <class V>
  static V Load(DF d, const T* w) {
    const hn::Rebind<T, DF> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, w));  // 16-bit shift
  }
  static float Scalar(const T* w) {
    uint16_t bits;
    std::memcpy(&bits, w, 2);
    return BF16ToF32(bits);
  }
};

// Summation order, the same for every tile shape, batch size and thread
// split (so a token's logits are bitwise the same whether it is decoded alone
// or verified in a batch): two vector accumulators per (row, token), one over
// the even-numbered full vectors of k and one over the odd-numbered ones, each
// one FMA per vector in order; then SumOfLanes(even + odd), then the scalar
// tail. Two chains let a single row (the decode kernel, which reads one row at
// a time) run two FMAs in flight.

// Accumulates the full vectors start, start + 2, start + 4, ... (vector
// index, not element) of R rows x T tokens into acc. ahead: the same offsets
// R rows further down are prefetched, one line at a time.
template <int R, int T, class L, class V>
HWY_INLINE void TilePhase(const typename L::T* const* wr, const float* const* xt, int64_t k,
                          int64_t start, V (&acc)[R][T], const uint8_t* ahead, size_t row_bytes) {
  using WT = typename L::T;
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = start * n; i + n <= k; i += 2 * n) {
    if (ahead != nullptr && (i * static_cast<int64_t>(sizeof(WT))) % 64 == 0) {
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) hwy::Prefetch(ahead + r * row_bytes + i * sizeof(WT));
    }
    V wv[R];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = L::template Load<V>(d, wr[r] + i);
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const V xv = hn::LoadU(d, xt[t] + i);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = hn::MulAdd(wv[r], xv, acc[r][t]);
    }
  }
}

// Register tile of R weight rows x T tokens: per vector step R weight loads
// (widened once: vcvtph2ps is 2 uops on the FMA ports, so widening, not the
// FMAs, bounds a narrow tile) and T activation loads feed R*T FMAs. The even
// and odd vectors are two passes over the tile's rows (the second from L1),
// so the tile keeps one accumulator per (row, token) in registers.
// ahead (one-token decode only): the same offsets R rows further down are
// prefetched, since decode makes a single pass over the weights.
template <int R, int T, class L>
HWY_INLINE void RowsTile(const uint8_t* w, size_t row_bytes, int64_t k, const float* x, int t0,
                         float* y, int64_t ldy, const uint8_t* ahead = nullptr) {
  using V = hn::Vec<DF>;
  using WT = typename L::T;
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const WT* wr[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const WT*>(w + r * row_bytes);
  const float* xt[T];
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) xt[t] = x + (t0 + t) * k;
  V even[R][T], odd[R][T];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) even[r][t] = odd[r][t] = hn::Zero(d);
  }
  TilePhase<R, T, L>(wr, xt, k, 0, even, ahead, row_bytes);
  TilePhase<R, T, L>(wr, xt, k, 1, odd, ahead, row_bytes);
  const int64_t tail = k / n * n;
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(even[r][t], odd[r][t])));
      for (int64_t j = tail; j < k; ++j) s += L::Scalar(wr[r] + j) * xt[t][j];
      y[(t0 + t) * ldy + r] = s;
    }
  }
}

// RowsTile, not inlined from 4 tokens: inlined into the row loop, GCC 12 kept
// 7 of the 16 accumulators of the 4 x 4 tile on the stack (an FMA from memory
// and a store per step); on its own it keeps those of the 4 x 4..6 tiles in
// registers. The 4 x 2 tile fares worse on its own (12 stack accesses per
// step) than inlined.
template <int R, int T, class L>
HWY_NOINLINE void RowsTileOutlined(const uint8_t* w, size_t row_bytes, int64_t k, const float* x,
                                   int t0, float* y, int64_t ldy, const uint8_t* ahead) {
  RowsTile<R, T, L>(w, row_bytes, k, x, t0, y, ldy, ahead);
}

// One row against one token with both chains in one loop (the decode kernel:
// it reads one row at a time, so the two chains are its only independent
// FMAs). Same sums as RowsTile<1, 1>. prefetch > 0: software prefetch that
// many bytes ahead along the row (past its end: into the next row).
template <class L>
HWY_INLINE void RowStream(const uint8_t* w, int64_t k, const float* x, float* y, int prefetch) {
  using V = hn::Vec<DF>;
  using WT = typename L::T;
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const WT* wr = reinterpret_cast<const WT*>(w);
  V even = hn::Zero(d), odd = hn::Zero(d);
  int64_t i = 0;
  const uint8_t* ahead = w + prefetch;
  for (; i + 2 * n <= k; i += 2 * n) {
    // One line per 64 bytes of weights (a step reads 2n elements: 64 bytes
    // of f16 on AVX-512, 128 of f32).
    if (prefetch > 0 && (i * sizeof(WT)) % 64 == 0) hwy::Prefetch(ahead + i * sizeof(WT));
    even = hn::MulAdd(L::template Load<V>(d, wr + i), hn::LoadU(d, x + i), even);
    odd = hn::MulAdd(L::template Load<V>(d, wr + i + n), hn::LoadU(d, x + i + n), odd);
  }
  if (i + n <= k) {
    even = hn::MulAdd(L::template Load<V>(d, wr + i), hn::LoadU(d, x + i), even);
    i += n;
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(even, odd)));
  for (; i < k; ++i) s += L::Scalar(wr + i) * x[i];
  *y = s;
}

// R rows against one token, k walked in chunks of `chunk` elements: per chunk
// row 0's part, then row 1's, ... (each row's two chains kept in registers),
// so the chunk of x is reused from L1 by R rows. Same sums as RowStream.
// For long rows: with k = 8192 (the 1B down projection) x is 32 KiB, a whole
// L1D, and one row at a time re-reads it from L2 for every row. 8 rows in
// 128-element chunks (runs of 256 bytes of f16 per row) read about as fast as
// one row over an x that fits L1; the other layouts measured were slower, and
// for short rows (k = 2048) one row at a time stays best (docs/performance.md,
// "Stream decode").
constexpr int64_t kChunkedMinK = 4096;
constexpr int kChunkedRows = 8;
constexpr int64_t kChunkElems = 128;
template <int R, class L>
HWY_INLINE void RowsStreamChunked(const uint8_t* w, size_t row_bytes, int64_t k, const float* x,
                                  float* y, int64_t chunk) {
  using V = hn::Vec<DF>;
  using WT = typename L::T;
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const WT* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const WT*>(w + r * row_bytes);
  V even[R], odd[R];
  for (int r = 0; r < R; ++r) even[r] = odd[r] = hn::Zero(d);
  const int64_t k2 = k / (2 * n) * (2 * n);
  for (int64_t c = 0; c < k2; c += chunk) {
    const int64_t ce = std::min(k2, c + chunk);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V e = even[r], o = odd[r];
      for (int64_t i = c; i < ce; i += 2 * n) {
        e = hn::MulAdd(L::template Load<V>(d, wr[r] + i), hn::LoadU(d, x + i), e);
        o = hn::MulAdd(L::template Load<V>(d, wr[r] + i + n), hn::LoadU(d, x + i + n), o);
      }
      even[r] = e;
      odd[r] = o;
    }
  }
  for (int r = 0; r < R; ++r) {
    int64_t i = k2;
    if (i + n <= k) {
      even[r] = hn::MulAdd(L::template Load<V>(d, wr[r] + i), hn::LoadU(d, x + i), even[r]);
      i += n;
    }
    float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(even[r], odd[r])));
    for (; i < k; ++i) s += L::Scalar(wr[r] + i) * x[i];
    y[r] = s;
  }
}

// Tokens per register tile: 4 rows x 6 tokens = 24 accumulators + 4 weight
// vectors + 1 activation vector fit AVX-512's 32 registers; AVX2 and SSE
// have 16 (4 x 2 = 8 + 4 + 1).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kTileTokens = 6;
#else
constexpr int kTileTokens = 2;
#endif

// R rows (the same R for the whole call) against every token, in
// ceil(n_tokens / kTileTokens) tiles of sizes that differ by at most one
// (8 tokens: 4 + 4, not 6 + 2): a tile's cost is mostly its weight widening,
// the same for any T, and the 4 x 2..3 tiles run slowest (GCC 12 keeps some
// of their accumulators on the stack). The sums do not depend on the split.
// ahead: the next rows to prefetch during the first token tile (null: none).
template <int R, class L>
HWY_INLINE void RowsAllTokens(const uint8_t* w, size_t row_bytes, int64_t k, const float* x,
                              int n_tokens, float* y, int64_t ldy, const uint8_t* ahead) {
  const int n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
  int t0 = 0;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int t1 = static_cast<int>(static_cast<int64_t>(n_tokens) * (tile + 1) / n_tiles);
    const uint8_t* a = tile == 0 ? ahead : nullptr;
    switch (t1 - t0) {
      case 6: RowsTileOutlined<R, 6, L>(w, row_bytes, k, x, t0, y, ldy, a); break;
      case 5: RowsTileOutlined<R, 5, L>(w, row_bytes, k, x, t0, y, ldy, a); break;
      case 4: RowsTileOutlined<R, 4, L>(w, row_bytes, k, x, t0, y, ldy, a); break;
      case 3: RowsTile<R, 3, L>(w, row_bytes, k, x, t0, y, ldy, a); break;
      case 2: RowsTile<R, 2, L>(w, row_bytes, k, x, t0, y, ldy, a); break;
      case 1: RowsTile<R, 1, L>(w, row_bytes, k, x, t0, y, ldy, a); break;
      default: break;
    }
    t0 = t1;
  }
}

template <class L>
HWY_INLINE void MatRows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                        const float* x, int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  // Decode: 4 rows per step are 4 independent FMA chains, enough to hide the
  // FMA latency under the weight stream. Every pass streams the weights once,
  // so the next row group is prefetched while one is worked on.
  int64_t r = 0;
  const int prefetch_rows = reads.prefetch_rows;
  if (n_tokens == 1 && reads.stream) {
    if (k >= kChunkedMinK) {
      for (; r + kChunkedRows <= n_rows; r += kChunkedRows) {
        RowsStreamChunked<kChunkedRows, L>(w + r * row_bytes, row_bytes, k, x, y + r, kChunkElems);
      }
    }
    for (; r < n_rows; ++r) RowStream<L>(w + r * row_bytes, k, x, y + r, reads.stream_prefetch);
    return;
  }
  const int64_t ahead = std::max(prefetch_rows, 4);
  for (; r + 4 <= n_rows; r += 4) {
    const uint8_t* wb = w + r * row_bytes;
    RowsAllTokens<4, L>(wb, row_bytes, k, x, n_tokens, y + r, ldy,
                        prefetch_rows > 0 ? wb + ahead * row_bytes : nullptr);
  }
  for (; r < n_rows; ++r) {
    RowsAllTokens<1, L>(w + r * row_bytes, row_bytes, k, x, n_tokens, y + r, ldy, nullptr);
  }
}

void MatRowsF32Impl(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                    int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  MatRows<LoadF32>(w, row_bytes, n_rows, k, x, n_tokens, y, ldy, reads);
}
void MatRowsF16Impl(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                    int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  MatRows<LoadF16>(w, row_bytes, n_rows, k, x, n_tokens, y, ldy, reads);
}
void MatRowsBF16Impl(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                     const float* x, int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  MatRows<LoadBF16>(w, row_bytes, n_rows, k, x, n_tokens, y, ldy, reads);
}

// sum(a[i] * b[i]) over n floats.
HWY_INLINE float Dot(const float* a, const float* b, int64_t n_elems) {
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * n <= n_elems; i += 2 * n) {
    acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
    acc1 = hn::MulAdd(hn::LoadU(d, a + i + n), hn::LoadU(d, b + i + n), acc1);
  }
  for (; i + n <= n_elems; i += n) acc0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc0);
#if !HWY_MEM_OPS_MIGHT_FAULT
  // Tail (e.g. head_dim 40 = 2 x 16 + 8) in one masked step; masked-off lanes
  // are neither read nor faulted on.
  if (i < n_elems) {
    const auto m = hn::FirstN(d, static_cast<size_t>(n_elems - i));
    acc1 = hn::MulAdd(hn::MaskedLoad(m, d, a + i), hn::MaskedLoad(m, d, b + i), acc1);
    i = n_elems;
  }
#endif
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0, acc1)));
  for (; i < n_elems; ++i) s += a[i] * b[i];
  return s;
}

// out[r][index] = Dot(a[r], b, n_elems) · scale for R rows against one shared
// b, bit for bit (the same chunk-to-accumulator assignment, tail and
// reduction as Dot), with b's loads shared and the R reductions independent.
template <int R>
HWY_INLINE void DotRows(const float* const* a, const float* b, int64_t n_elems, float scale,
                        float* const* out, int index) {
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<DF> acc0[R], acc1[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * n <= n_elems; i += 2 * n) {
    const auto b0 = hn::LoadU(d, b + i), b1 = hn::LoadU(d, b + i + n);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      acc0[r] = hn::MulAdd(hn::LoadU(d, a[r] + i), b0, acc0[r]);
      acc1[r] = hn::MulAdd(hn::LoadU(d, a[r] + i + n), b1, acc1[r]);
    }
  }
  for (; i + n <= n_elems; i += n) {
    const auto b0 = hn::LoadU(d, b + i);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc0[r] = hn::MulAdd(hn::LoadU(d, a[r] + i), b0, acc0[r]);
  }
#if !HWY_MEM_OPS_MIGHT_FAULT
  if (i < n_elems) {
    const auto m = hn::FirstN(d, static_cast<size_t>(n_elems - i));
    const auto bt = hn::MaskedLoad(m, d, b + i);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc1[r] = hn::MulAdd(hn::MaskedLoad(m, d, a[r] + i), bt, acc1[r]);
    i = n_elems;
  }
#endif
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0[r], acc1[r])));
    for (int64_t j = i; j < n_elems; ++j) s += a[r][j] * b[j];
    out[r][index] = s * scale;
  }
}

void RmsNormImpl(const float* x, const float* w, int n_tokens, int dim, float eps, float* out) {
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + static_cast<int64_t>(t) * dim;
    float* ot = out + static_cast<int64_t>(t) * dim;
    const float scale = 1.f / std::sqrt(Dot(xt, xt, dim) / static_cast<float>(dim) + eps);
    const auto vs = hn::Set(d, scale);
    int64_t i = 0;
    for (; i + n <= dim; i += n) {
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, xt + i), vs), hn::LoadU(d, w + i)), d, ot + i);
    }
    for (; i < dim; ++i) ot[i] = xt[i] * scale * w[i];
  }
}

// x (n_tokens, n_heads, head_dim) rotated by angles (n_tokens, head_dim):
// token t's cos at angles + t * head_dim, its sin head_dim / 2 further.
void RopeRotateImpl(float* x, int n_tokens, int n_heads, int head_dim, const float* angles,
                    bool interleaved) {
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const int half = head_dim / 2;
  for (int t = 0; t < n_tokens; ++t) {
    const float* c = angles + static_cast<int64_t>(t) * head_dim;
    const float* s = c + half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      if (interleaved) {
        for (int i = 0; i < half; ++i) {
          float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = a * s[i] + b * c[i];
        }
        continue;
      }
      int64_t i = 0;
      for (; i + n <= half; i += n) {
        auto a = hn::LoadU(d, v + i), b = hn::LoadU(d, v + half + i);
        auto vc = hn::LoadU(d, c + i), vsn = hn::LoadU(d, s + i);
        hn::StoreU(hn::NegMulAdd(b, vsn, hn::Mul(a, vc)), d, v + i);
        hn::StoreU(hn::MulAdd(a, vsn, hn::Mul(b, vc)), d, v + half + i);
      }
      for (; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = a * s[i] + b * c[i];
      }
    }
  }
}

void SwiGLUImpl(const float* gate, const float* up, int64_t n_elems, float* out) {
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.f);
  // exp(-g) is clamped at e^88 (< FLT_MAX): Highway's Exp is valid below
  // +88.7, and silu(g) is ~0 there anyway.
  const auto hi = hn::Set(d, 88.f);
  int64_t i = 0;
  for (; i + n <= n_elems; i += n) {
    auto g = hn::LoadU(d, gate + i);
    auto e = hn::Exp(d, hn::Min(hn::Neg(g), hi));
    auto silu = hn::Div(g, hn::Add(one, e));
    hn::StoreU(hn::Mul(silu, hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n_elems; ++i) {
    float g = gate[i];
    out[i] = g / (1.f + std::exp(std::min(-g, 88.f))) * up[i];
  }
}

// The largest of n_elems >= 1 values.
float MaxImpl(const float* x, int64_t n_elems) {
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  float mx = x[0];
  int64_t i = 0;
  if (n_elems >= n) {
    auto vm = hn::LoadU(d, x);
    for (i = n; i + n <= n_elems; i += n) vm = hn::Max(vm, hn::LoadU(d, x + i));
    mx = hn::GetLane(hn::MaxOfLanes(d, vm));
  }
  for (; i < n_elems; ++i) mx = std::max(mx, x[i]);
  return mx;
}

void SoftmaxImpl(float* x, int64_t n_elems) {
  if (n_elems <= 0) return;
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const float mx = MaxImpl(x, n_elems);
  int64_t i = 0;
  const auto vmx = hn::Set(d, mx);
  auto vsum = hn::Zero(d);
  for (i = 0; i + n <= n_elems; i += n) {
    auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmx));
    hn::StoreU(e, d, x + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n_elems; ++i) sum += x[i] = std::exp(x[i] - mx);
  const float inv = 1.f / sum;
  const auto vinv = hn::Set(d, inv);
  for (i = 0; i + n <= n_elems; i += n) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vinv), d, x + i);
  for (; i < n_elems; ++i) x[i] *= inv;
}

float LogSumExpImpl(const float* x, int64_t n_elems) {
  if (n_elems <= 0) return -std::numeric_limits<float>::infinity();
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const float mx = MaxImpl(x, n_elems);
  if (!std::isfinite(mx)) return mx;  // +inf or NaN dominates; all -inf stays -inf
  int64_t i = 0;
  const auto vmx = hn::Set(d, mx);
  auto vsum = hn::Zero(d);
  for (i = 0; i + n <= n_elems; i += n)
    vsum = hn::Add(vsum, hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmx)));
  double sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n_elems; ++i) sum += std::exp(x[i] - mx);
  return mx + static_cast<float>(std::log(sum));
}

int64_t ArgmaxImpl(const float* x, int64_t n_elems) {
  if (n_elems <= 0) return 0;
  const DF d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  // Pass 1: the maximum; pass 2: its first index (ties -> lowest index).
  const float mx = MaxImpl(x, n_elems);
  int64_t i = 0;
  const auto vmx = hn::Set(d, mx);
  for (i = 0; i + n <= n_elems; i += n) {
    if (!hn::AllFalse(d, hn::Eq(hn::LoadU(d, x + i), vmx))) break;
  }
  for (; i < n_elems; ++i) {
    if (x[i] == mx) return i;
  }
  return 0;  // only NaNs: no element compares equal
}

// For R rows: out[r][off, off + K·N) (= or += when !first) sum_j p[r][j] ·
// v[j][off, ...) over n slots in slot order, the sums held in registers and
// each v[j] loaded once for all rows.
template <int R, int K>
HWY_INLINE void WeightedSumChunk(const float* const* p, const float* const* v, int n, size_t off,
                                 bool first, float* const* out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  hn::Vec<DF> acc[R][K];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int i = 0; i < K; ++i)
      acc[r][i] = first ? hn::Zero(d) : hn::LoadU(d, out[r] + off + i * N);
  for (int j = 0; j < n; ++j) {
    hn::Vec<DF> vj[K];
#pragma GCC unroll 16
    for (int i = 0; i < K; ++i) vj[i] = hn::LoadU(d, v[j] + off + i * N);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const auto pj = hn::Set(d, p[r][j]);
#pragma GCC unroll 16
      for (int i = 0; i < K; ++i) acc[r][i] = hn::MulAdd(pj, vj[i], acc[r][i]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int i = 0; i < K; ++i) hn::StoreU(acc[r][i], d, out[r] + off + i * N);
}

// out[r] (= or += when !first) sum_j p[r][j] · v[j] over n slots of head_dim
// floats, for R rows (R · 4 vectors of sums at a time). Every lane sees the
// same fused multiply-adds in slot order whatever R, n and the chunking, and
// however a row's slots are split between calls, so a query's output is the
// same bits alone and in a batch.
template <int R>
HWY_INLINE void WeightedSumRows(const float* const* p, const float* const* v, int n, int head_dim,
                                bool first, float* const* out) {
  const size_t N = hn::Lanes(DF());
  size_t off = 0;
  int left = static_cast<int>(head_dim / N);
  for (; left >= 4; left -= 4, off += 4 * N) WeightedSumChunk<R, 4>(p, v, n, off, first, out);
  // clang-format off
  switch (left) {
    case 1: WeightedSumChunk<R, 1>(p, v, n, off, first, out); break;
    case 2: WeightedSumChunk<R, 2>(p, v, n, off, first, out); break;
    case 3: WeightedSumChunk<R, 3>(p, v, n, off, first, out); break;
    default: break;
  }
  // clang-format on
  off += left * N;
  if (off == static_cast<size_t>(head_dim)) return;
#if !HWY_MEM_OPS_MIGHT_FAULT
  // The tail (head_dim 40 = 2 x 16 + 8) in masked lanes: neither read nor
  // written beyond head_dim.
  const DF d;
  const auto m = hn::FirstN(d, head_dim - off);
  hn::Vec<DF> acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = first ? hn::Zero(d) : hn::MaskedLoad(m, d, out[r] + off);
  for (int j = 0; j < n; ++j) {
    const auto vj = hn::MaskedLoad(m, d, v[j] + off);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(hn::Set(d, p[r][j]), vj, acc[r]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) hn::BlendedStore(acc[r], m, d, out[r] + off);
#else
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    for (size_t i = off; i < static_cast<size_t>(head_dim); ++i) {
      float acc = first ? 0.f : out[r][i];
      for (int j = 0; j < n; ++j) acc = std::fma(p[r][j], v[j][i], acc);
      out[r][i] = acc;
    }
  }
#endif
}

// A work item is up to kAttentionRows query rows (token t, head h) that share
// one KV head: rows r = t · group + (h mod group), consecutive. Its slots are
// visited in blocks of kAttentionSlotBlock, each block's K (then V) rows
// read once from memory for all the item's rows and reused from L1, instead
// of once per query head and token (grouped-query heads and the tokens of a
// verify pass read the same slots). Per row the arithmetic is that of a lone
// query: the scores of its visible slots in slot order (compacted), their
// softmax, and the weighted sum in slot order.
constexpr int kAttentionSlotBlock = 64;
constexpr int kAttentionPrefetch = 8;

void AttentionItemsImpl(const AttentionArgs& a, int64_t begin, int64_t end, int64_t step) {
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t rows_total = static_cast<int64_t>(a.n_q) * group;
  const int64_t row_blocks = (rows_total + kAttentionRows - 1) / kAttentionRows;
  const int64_t kv_stride = static_cast<int64_t>(a.n_kv_heads) * a.head_dim;
  const int first_q_slot = a.n_ctx - a.n_q;
  const float scale = 1.f / std::sqrt(static_cast<float>(a.head_dim));
  const int ps = a.kv.page_size;
  // Per row: the scores of its visible slots, compacted (one set per thread,
  // reused across calls).
  thread_local std::vector<float> scores;
  const size_t need = static_cast<size_t>(kAttentionRows) * a.n_ctx;
  if (scores.size() < need) scores.resize(need);
  const float* kp[kAttentionSlotBlock];
  const float* vp[kAttentionSlotBlock];
  const float* vis[kAttentionSlotBlock];
  for (int64_t item = begin; item < end; item += step) {
    const int kvh = static_cast<int>(item / row_blocks);
    const int64_t r0 = (item % row_blocks) * kAttentionRows;
    const int n_rows = static_cast<int>(std::min<int64_t>(kAttentionRows, rows_total - r0));
    const int64_t kv_off = static_cast<int64_t>(kvh) * a.head_dim;
    const float* qv[kAttentionRows];
    float* ov[kAttentionRows];
    const uint8_t* mask_row[kAttentionRows];
    int slot_end[kAttentionRows], n_vis[kAttentionRows];
    for (int r = 0; r < n_rows; ++r) {
      const int64_t rg = r0 + r;
      const int t = static_cast<int>(rg / group);
      const int64_t row = static_cast<int64_t>(t) * a.n_heads + kvh * group + rg % group;
      qv[r] = a.q + row * a.head_dim;
      ov[r] = a.out + row * a.head_dim;
      mask_row[r] = a.mask == nullptr ? nullptr : a.mask + static_cast<int64_t>(t) * a.n_q;
      // Causal: slots up to the row's own; a tree mask may see any of them.
      slot_end[r] = a.mask == nullptr ? first_q_slot + t + 1 : a.n_ctx;
    }
    auto visible = [&](int r, int s) {
      return s < first_q_slot || mask_row[r] == nullptr || mask_row[r][s - first_q_slot] != 0;
    };
    // Slot s's row of this KV head in K or V pages.
    auto slot_row = [&](float* const* pages, int s) {
      return pages[s / ps] + static_cast<int64_t>(s % ps) * kv_stride + kv_off;
    };
    // Slot block [b0, b1): its K or V row addresses.
    auto block_rows = [&](float* const* pages, int b0, int b1, const float** out) {
      for (int s = b0; s < b1; ++s) out[s - b0] = slot_row(pages, s);
    };
    int max_end = 0;
    for (int r = 0; r < n_rows; ++r) max_end = std::max(max_end, slot_end[r]);
    // The slots of a KV head are head_dim floats at a stride of all KV
    // heads: too sparse for the hardware prefetcher, so slots are requested
    // ahead of use (K a few slots ahead, V a block ahead).
    const size_t row_bytes = static_cast<size_t>(a.head_dim) * sizeof(float);
    auto prefetch_slot = [&](float* const* pages, int s) {
      const char* row = reinterpret_cast<const char*>(slot_row(pages, s));
      for (size_t off = 0; off < row_bytes; off += 64) hwy::Prefetch(row + off);
    };
    auto prefetch_block = [&](float* const* pages, int b0) {
      const int b1 = std::min(max_end, b0 + kAttentionSlotBlock);
      for (int s = b0; s < b1; ++s) prefetch_slot(pages, s);
    };
    float* sc[kAttentionRows];
    for (int r = 0; r < n_rows; ++r) sc[r] = scores.data() + static_cast<size_t>(r) * a.n_ctx;
    // Every row sees the whole prefix [0, first_q_slot): there the rows go
    // four (or two) at a time over the same slots (scores at index = slot);
    // the query slots after it go row by row, compacted to the visible ones.
    const int prefix = std::min(first_q_slot, max_end);
    for (int r = 0; r < n_rows; ++r) n_vis[r] = prefix;
    for (int s = 0; s < std::min(max_end, kAttentionPrefetch); ++s) prefetch_slot(a.kv.k_pages, s);
    for (int b0 = 0; b0 < max_end; b0 += kAttentionSlotBlock) {
      const int b1 = std::min(max_end, b0 + kAttentionSlotBlock);
      block_rows(a.kv.k_pages, b0, b1, kp);
      if (b1 >= max_end) prefetch_block(a.kv.v_pages, 0);
      const int dense_end = std::min(b1, prefix);
      int r = 0;
      for (; r + 4 <= n_rows; r += 4) {
        for (int s = b0; s < dense_end; ++s) {
          if (r == 0 && s + kAttentionPrefetch < max_end)
            prefetch_slot(a.kv.k_pages, s + kAttentionPrefetch);
          DotRows<4>(qv + r, kp[s - b0], a.head_dim, scale, sc + r, s);
        }
      }
      for (; r + 2 <= n_rows; r += 2) {
        for (int s = b0; s < dense_end; ++s)
          DotRows<2>(qv + r, kp[s - b0], a.head_dim, scale, sc + r, s);
      }
      for (; r < n_rows; ++r) {
        for (int s = b0; s < dense_end; ++s) sc[r][s] = Dot(qv[r], kp[s - b0], a.head_dim) * scale;
      }
      for (r = 0; r < n_rows; ++r) {
        const int e = std::min(b1, slot_end[r]);
        for (int s = std::max(b0, prefix); s < e; ++s) {
          if (!visible(r, s)) continue;
          sc[r][n_vis[r]++] = Dot(qv[r], kp[s - b0], a.head_dim) * scale;
        }
      }
    }
    for (int r = 0; r < n_rows; ++r) {
      if (n_vis[r] > 0)
        SoftmaxImpl(sc[r], n_vis[r]);
      else
        std::fill(ov[r], ov[r] + a.head_dim, 0.f);  // nothing visible: zeros (as the reference)
    }
    int done[kAttentionRows];
    for (int r = 0; r < n_rows; ++r) done[r] = prefix;
    for (int b0 = 0; b0 < max_end; b0 += kAttentionSlotBlock) {
      const int b1 = std::min(max_end, b0 + kAttentionSlotBlock);
      block_rows(a.kv.v_pages, b0, b1, vp);
      if (b1 < max_end) prefetch_block(a.kv.v_pages, b1);
      const int dense_end = std::min(b1, prefix);
      if (b0 < dense_end) {
        const int n = dense_end - b0;
        const float* p[kAttentionRows];
        for (int r = 0; r < n_rows; ++r) p[r] = sc[r] + b0;
        int r = 0;
        for (; r + 4 <= n_rows; r += 4)
          WeightedSumRows<4>(p + r, vp, n, a.head_dim, b0 == 0, ov + r);
        for (; r + 2 <= n_rows; r += 2)
          WeightedSumRows<2>(p + r, vp, n, a.head_dim, b0 == 0, ov + r);
        for (; r < n_rows; ++r) WeightedSumRows<1>(p + r, vp, n, a.head_dim, b0 == 0, ov + r);
      }
      for (int r = 0; r < n_rows; ++r) {
        const int e = std::min(b1, slot_end[r]);
        int n = 0;
        for (int s = std::max(b0, prefix); s < e; ++s)
          if (visible(r, s)) vis[n++] = vp[s - b0];
        if (n == 0) continue;
        const float* p = sc[r] + done[r];
        WeightedSumRows<1>(&p, vis, n, a.head_dim, done[r] == 0, ov + r);
        done[r] += n;
      }
    }
  }
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace specd::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::kernels::cpu {

HWY_EXPORT(MatRowsF32Impl);
HWY_EXPORT(MatRowsF16Impl);
HWY_EXPORT(MatRowsBF16Impl);
HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(RopeRotateImpl);
HWY_EXPORT(SwiGLUImpl);
HWY_EXPORT(SoftmaxImpl);
HWY_EXPORT(ArgmaxImpl);
HWY_EXPORT(LogSumExpImpl);
HWY_EXPORT(AttentionItemsImpl);
HWY_EXPORT(TargetNameImpl);

void MatRowsF32(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  HWY_DYNAMIC_DISPATCH(MatRowsF32Impl)(w, row_bytes, n_rows, k, x, n_tokens, y, ldy, reads);
}
void MatRowsF16(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  HWY_DYNAMIC_DISPATCH(MatRowsF16Impl)(w, row_bytes, n_rows, k, x, n_tokens, y, ldy, reads);
}
void MatRowsBF16(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k, const float* x,
                 int n_tokens, float* y, int64_t ldy, const DecodeReads& reads) {
  HWY_DYNAMIC_DISPATCH(MatRowsBF16Impl)(w, row_bytes, n_rows, k, x, n_tokens, y, ldy, reads);
}
void RmsNormF(const float* x, const float* w, int n_tokens, int dim, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, w, n_tokens, dim, eps, out);
}
void RopeRotateF(float* x, int n_tokens, int n_heads, int head_dim, const float* angles,
                 bool interleaved) {
  HWY_DYNAMIC_DISPATCH(RopeRotateImpl)(x, n_tokens, n_heads, head_dim, angles, interleaved);
}
void SwiGLUF(const float* gate, const float* up, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SwiGLUImpl)(gate, up, n, out);
}
void SoftmaxF(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n); }
int64_t ArgmaxF(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(ArgmaxImpl)(x, n); }
float LogSumExpF(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(LogSumExpImpl)(x, n); }
void AttentionItems(const AttentionArgs& args, int64_t begin, int64_t end, int64_t step) {
  HWY_DYNAMIC_DISPATCH(AttentionItemsImpl)(args, begin, end, step);
}
const char* FloatOpsTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace specd::kernels::cpu
#endif  // HWY_ONCE
