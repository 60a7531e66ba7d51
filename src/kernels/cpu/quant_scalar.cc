// Portable scalar Q8_0 / Q4_0 kernels: the fallback on CPUs without AVX2 and
// on non-x86 builds. Same math and summation order as the SIMD paths
// (quant_kernels.h).
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_kernels.h"
#include "tensor/dtype.h"

namespace specd::kernels::cpu {
namespace {

void QuantizeRowScalar(const float* x, int64_t k, int corr_offset, int8_t* qs, float* d,
                       int32_t* corr) {
  for (int64_t b = 0; b < k / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.f;
    for (int i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    float db = amax / 127.f;
    float id = db != 0.f ? 1.f / db : 0.f;
    d[b] = db;
    int8_t* q = qs + b * kQuantBlock;
    for (int i = 0; i < kQuantBlock; ++i) q[i] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
    if (corr_offset != 0) {
      for (int l = 0; l < 8; ++l) {
        corr[b * 8 + l] = -corr_offset * (q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]);
      }
    }
  }
}

template <typename Block>
void RowsScalar(const uint8_t* w, size_t row_bytes, int64_t n_rows, const QuantizedActs& a,
                float* y, int64_t ldy) {
  int wq[kQuantBlock];
  for (int64_t r = 0; r < n_rows; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(w + r * row_bytes);
    for (int t = 0; t < a.n_tokens; ++t) {
      const int8_t* aq = a.qs + t * a.k;
      const float* ad = a.d + t * a.nb;
      float lane[kSumLanes] = {};
      for (int64_t b = 0; b < a.nb; ++b) {
        const Block& blk = blocks[b];
        if constexpr (sizeof(Block) == sizeof(BlockQ8_0)) {
          for (int i = 0; i < kQuantBlock; ++i) wq[i] = blk.qs[i];
        } else {
          for (int i = 0; i < kQuantBlock / 2; ++i) {
            wq[i] = (blk.qs[i] & 0xF) - 8;
            wq[i + 16] = (blk.qs[i] >> 4) - 8;
          }
        }
        int32_t idot = 0;
        const int8_t* ab = aq + b * kQuantBlock;
        for (int i = 0; i < kQuantBlock; ++i) idot += wq[i] * ab[i];
        float& l = lane[b % kSumLanes];
        l = std::fma(static_cast<float>(idot), F16ToF32(blk.d) * ad[b], l);
      }
      y[t * ldy + r] = SumLanes(lane);
    }
  }
}

}  // namespace

const QuantKernelTable* QuantKernelsScalar() {
  static const QuantKernelTable table = [] {
    QuantKernelTable t;
    t.quantize = QuantizeRowScalar;
    t.q8_0 = RowsScalar<BlockQ8_0>;
    t.q4_0 = RowsScalar<BlockQ4_0>;
    return t;
  }();
  return &table;
}

void BuildTiledActs(const QuantizedActs& a, int t0, int n_tiles, std::vector<int8_t>* qs,
                    std::vector<int32_t>* corr, std::vector<float>* d,
                    std::vector<int32_t>* order, TiledActs* out) {
  const int64_t nb = a.nb;
  LaneOrder(nb, kSumLanes, order);
  qs->assign(static_cast<size_t>(n_tiles * nb * 8 * kTileTokens * 4), 0);
  corr->assign(static_cast<size_t>(n_tiles * nb * kTileTokens), 0);
  d->assign(static_cast<size_t>(n_tiles * nb * kTileTokens), 0.f);
  for (int tile = 0; tile < n_tiles; ++tile) {
    for (int lane = 0; lane < kTileTokens; ++lane) {
      const int t = t0 + tile * kTileTokens + lane;
      if (t >= a.n_tokens) break;
      const int8_t* src = a.qs + t * a.k;
      for (int64_t i = 0; i < nb; ++i) {
        const int64_t b = (*order)[i];
        const int64_t tb = tile * nb + i;
        int8_t* dst = qs->data() + tb * 8 * kTileTokens * 4 + lane * 4;
        for (int g = 0; g < 8; ++g) std::memcpy(dst + g * kTileTokens * 4, src + b * kQuantBlock + 4 * g, 4);
        int32_t c = 0;
        for (int l = 0; l < 8; ++l) c += a.corr[(t * nb + b) * 8 + l];
        (*corr)[tb * kTileTokens + lane] = c;
        (*d)[tb * kTileTokens + lane] = a.d[t * nb + b];
      }
    }
  }
  out->n_tiles = n_tiles;
  out->nb = nb;
  out->qs = qs->data();
  out->corr = corr->data();
  out->d = d->data();
  out->order = order->data();
  out->prefetch_rows = a.prefetch_rows;
}

void BuildQuadActs(const QuantizedActs& a, int t0, std::vector<int8_t>* qs,
                   std::vector<int32_t>* corr, std::vector<float>* d, QuadActs* out) {
  const int64_t nb = a.nb;
  const int n = a.n_tokens - t0;
  const int n_quads = (n + kQuadTokens - 1) / kQuadTokens;
  const int64_t nb4 = (nb + 3) / 4;
  qs->assign(static_cast<size_t>(n_quads * nb * 2 * kQuadTokens * 16), 0);
  corr->assign(static_cast<size_t>(n_quads * nb * kQuadTokens * 4), 0);
  d->assign(static_cast<size_t>(n_quads * nb4 * 16), 0.f);
  for (int i = 0; i < n; ++i) {
    const int quad = i / kQuadTokens, lane = i % kQuadTokens, t = t0 + i;
    const int8_t* src = a.qs + t * a.k;
    const int32_t* c = a.corr + t * nb * 8;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t qb = quad * nb + b;
      for (int h = 0; h < 2; ++h) {
        std::memcpy(qs->data() + ((qb * 2 + h) * kQuadTokens + lane) * 16,
                    src + b * kQuantBlock + 16 * h, 16);
      }
      for (int j = 0; j < 4; ++j) {
        (*corr)[(qb * kQuadTokens + lane) * 4 + j] = c[b * 8 + j] + c[b * 8 + j + 4];
      }
      (*d)[(quad * nb4 + b / 4) * 16 + lane * 4 + b % 4] = a.d[t * nb + b];
    }
  }
  out->n_quads = n_quads;
  out->nb = nb;
  out->qs = qs->data();
  out->corr = corr->data();
  out->d = d->data();
  out->prefetch_rows = a.prefetch_rows;
}

const QuantKernelTable* GetQuantKernels(QuantDotIsa isa) {
  switch (isa) {
    case QuantDotIsa::kScalar: return QuantKernelsScalar();
    case QuantDotIsa::kAvx2: return QuantKernelsAvx2();
    case QuantDotIsa::kAvxVnni: return QuantKernelsAvxVnni();
    case QuantDotIsa::kAvx512Vnni: return QuantKernelsAvx512Vnni();
  }
  return nullptr;
}

}  // namespace specd::kernels::cpu
