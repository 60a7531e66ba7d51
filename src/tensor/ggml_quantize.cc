// Quantization of f32 rows into ggml's block types (ggml_blocks.h).
//
// Q4_1, Q5_0 and Q5_1 follow ggml's quantize_row_*_ref step for step (the
// same f32 arithmetic and truncation), so their bytes equal ggml's and
// gguf-py's. The K-quants and the IQ4 types use round-to-nearest with
// min/max sub-block scales, and quantize the sub-block scales against the
// super-block scale as ggml does; they skip ggml's iterative scale search
// (make_qkx2_quants and friends), so their bytes differ from llama.cpp's
// quantizer while being valid blocks of the same format. Contraction is off
// for the ggml-exact ones (a fused multiply-add would round differently).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/ggml_blocks.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace specd {
namespace {

// Round half to even, as ggml's nearest_int; saturates far outside the int
// range (every caller clamps to a few bits) and maps NaN to 0.
int NearestInt(float v) {
  if (!(std::fabs(v) < 1e9f)) return std::isnan(v) ? 0 : (v > 0 ? 1000000000 : -1000000000);
  return static_cast<int>(std::nearbyint(v));
}

int Clamp(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// The element of largest magnitude, with its sign (the first of equals).
float SignedAbsMax(const float* x, int n) {
  float amax = 0.f, max = 0.f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// The entry of largest magnitude of n, with its sign.
float LargestScale(const float* s, int n) { return SignedAbsMax(s, n); }

// Nearest IQ4_NL level to v: index into kIq4NlValues.
int NearestIq4(float v) {
  int best = 0;
  float best_err = std::fabs(v - kIq4NlValues[0]);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(v - kIq4NlValues[i]);
    if (err < best_err) {
      best_err = err;
      best = i;
    }
  }
  return best;
}

// Asymmetric sub-block of n elements with levels 0..nmax: the step and the
// amount to subtract (min clamped to <= 0, as ggml keeps it).
void StepAndMin(const float* x, int n, int nmax, float* step, float* neg_min) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  mn = std::min(mn, 0.f);
  *step = (mx - mn) / static_cast<float>(nmax);
  *neg_min = -mn;
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with levels 0..nmax, 6-bit scales and
// mins. q: (256) levels.
void QuantizeKAsym(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                   uint8_t* scales_out, uint8_t* q) {
  float step[8], neg_min[8];
  for (int s = 0; s < 8; ++s) StepAndMin(x + 32 * s, 32, nmax, &step[s], &neg_min[s]);
  const float max_step = *std::max_element(step, step + 8);
  const float max_min = *std::max_element(neg_min, neg_min + 8);
  const float inv_step = max_step > 0.f ? 63.f / max_step : 0.f;
  const float inv_min = max_min > 0.f ? 63.f / max_min : 0.f;
  uint8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = static_cast<uint8_t>(std::min(63, NearestInt(inv_step * step[s])));
    mn[s] = static_cast<uint8_t>(std::min(63, NearestInt(inv_min * neg_min[s])));
  }
  *d_out = F32ToF16(max_step / 63.f);
  *dmin_out = F32ToF16(max_min / 63.f);
  PackKScales(sc, mn, scales_out);
  const float d = F16ToF32(*d_out), dmin = F16ToF32(*dmin_out);
  for (int s = 0; s < 8; ++s) {
    const float ds = d * static_cast<float>(sc[s]), dm = dmin * static_cast<float>(mn[s]);
    for (int l = 0; l < 32; ++l) {
      const float v = x[32 * s + l];
      q[32 * s + l] =
          static_cast<uint8_t>(ds != 0.f ? Clamp(NearestInt((v + dm) / ds), 0, nmax) : 0);
    }
  }
}

void QuantizeQ4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < kQuantBlock; ++i) {
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
    }
    const float d = (mx - mn) / 15.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = F32ToF16(d);
    y[b].m = F32ToF16(mn);
    for (int i = 0; i < 16; ++i) {
      const int q0 = std::min(15, static_cast<int>((x[i] - mn) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[i + 16] - mn) * id + 0.5f));
      y[b].qs[i] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// The five-bit quants q (32) into a Q5 block's qs and qh.
void Pack5(const int* q, uint8_t* qh_bytes, uint8_t* qs) {
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    qs[i] = static_cast<uint8_t>((q[i] & 15) | (q[i + 16] & 15) << 4);
    qh |= static_cast<uint32_t>(q[i] >> 4 & 1) << i;
    qh |= static_cast<uint32_t>(q[i + 16] >> 4 & 1) << (i + 16);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

void QuantizeQ5_0(const float* x, BlockQ5_0* y, int64_t n) {
  int q[kQuantBlock];
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    const float d = SignedAbsMax(x, kQuantBlock) / -16.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = F32ToF16(d);
    for (int i = 0; i < kQuantBlock; ++i) q[i] = std::min(31, static_cast<int>(x[i] * id + 16.5f));
    Pack5(q, y[b].qh, y[b].qs);
  }
}

void QuantizeQ5_1(const float* x, BlockQ5_1* y, int64_t n) {
  int q[kQuantBlock];
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < kQuantBlock; ++i) {
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
    }
    const float d = (mx - mn) / 31.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = F32ToF16(d);
    y[b].m = F32ToF16(mn);
    for (int i = 0; i < kQuantBlock; ++i) {
      q[i] = std::min(31, static_cast<int>((x[i] - mn) * id + 0.5f));
    }
    Pack5(q, y[b].qh, y[b].qs);
  }
}

void QuantizeIQ4_NL(const float* x, BlockIQ4_NL* y, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    // The largest magnitude maps onto the level -127.
    y[b].d = F32ToF16(SignedAbsMax(x, kQuantBlock) / -127.f);
    const float d = F16ToF32(y[b].d);
    const float id = d != 0.f ? 1.f / d : 0.f;
    for (int i = 0; i < 16; ++i) {
      y[b].qs[i] = static_cast<uint8_t>(NearestIq4(x[i] * id) | NearestIq4(x[i + 16] * id) << 4);
    }
  }
}

void QuantizeQ2_K(const float* x, BlockQ2_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float step[16], neg_min[16];
    for (int s = 0; s < 16; ++s) StepAndMin(x + 16 * s, 16, 3, &step[s], &neg_min[s]);
    const float max_step = *std::max_element(step, step + 16);
    const float max_min = *std::max_element(neg_min, neg_min + 16);
    const float inv_step = max_step > 0.f ? 15.f / max_step : 0.f;
    const float inv_min = max_min > 0.f ? 15.f / max_min : 0.f;
    y[b].d = F32ToF16(max_step / 15.f);
    y[b].dmin = F32ToF16(max_min / 15.f);
    const float d = F16ToF32(y[b].d), dmin = F16ToF32(y[b].dmin);
    std::memset(y[b].qs, 0, sizeof(y[b].qs));
    for (int s = 0; s < 16; ++s) {
      const int sc = std::min(15, NearestInt(inv_step * step[s]));
      const int mn = std::min(15, NearestInt(inv_min * neg_min[s]));
      y[b].scales[s] = static_cast<uint8_t>(sc | mn << 4);
      const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(mn);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i;
        const int q = ds != 0.f ? Clamp(NearestInt((x[e] + dm) / ds), 0, 3) : 0;
        y[b].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q << (2 * (e % 128 / 32)));
      }
    }
  }
}

void QuantizeQ3_K(const float* x, BlockQ3_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float step[16];
    for (int s = 0; s < 16; ++s) step[s] = SignedAbsMax(x + 16 * s, 16) / -4.f;
    const float largest = LargestScale(step, 16);
    const float iscale = largest != 0.f ? -32.f / largest : 0.f;
    y[b].d = F32ToF16(iscale != 0.f ? 1.f / iscale : 0.f);
    const float d = F16ToF32(y[b].d);
    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    std::memset(y[b].qs, 0, sizeof(y[b].qs));
    std::memset(y[b].hmask, 0, sizeof(y[b].hmask));
    for (int s = 0; s < 16; ++s) {
      const int l = Clamp(NearestInt(iscale * step[s]), -32, 31);
      const int u = l + 32;
      y[b].scales[s % 8] |= static_cast<uint8_t>((u & 15) << (s < 8 ? 0 : 4));
      y[b].scales[8 + s % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (s / 4)));
      const float ds = d * static_cast<float>(l);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i;
        const int v = (ds != 0.f ? Clamp(NearestInt(x[e] / ds), -4, 3) : 0) + 4;
        y[b].qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((v & 3) << (2 * (e % 128 / 32)));
        if (v >= 4) y[b].hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
      }
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t n) {
  uint8_t q[kSuperBlock];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    QuantizeKAsym(x, 15, &y[b].d, &y[b].dmin, y[b].scales, q);
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[32 * p + l] = static_cast<uint8_t>(q[64 * p + l] | q[64 * p + 32 + l] << 4);
      }
    }
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* y, int64_t n) {
  uint8_t q[kSuperBlock];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    QuantizeKAsym(x, 31, &y[b].d, &y[b].dmin, y[b].scales, q);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * p + l], hi = q[64 * p + 32 + l];
        y[b].qs[32 * p + l] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
        y[b].qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * p) | (hi >> 4) << (2 * p + 1));
      }
    }
  }
}

void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float step[16];
    for (int s = 0; s < 16; ++s) step[s] = SignedAbsMax(x + 16 * s, 16) / -32.f;
    const float largest = LargestScale(step, 16);
    const float iscale = largest != 0.f ? -128.f / largest : 0.f;
    y[b].d = F32ToF16(iscale != 0.f ? 1.f / iscale : 0.f);
    const float d = F16ToF32(y[b].d);
    std::memset(y[b].ql, 0, sizeof(y[b].ql));
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int s = 0; s < 16; ++s) {
      const int sc = Clamp(NearestInt(iscale * step[s]), -128, 127);
      y[b].scales[s] = static_cast<int8_t>(sc);
      const float ds = d * static_cast<float>(sc);
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i;
        const int v = (ds != 0.f ? Clamp(NearestInt(x[e] / ds), -32, 31) : 0) + 32;
        const int h = e / 128, j = e % 128 / 32, l = e % 32;
        y[b].ql[64 * h + 32 * (j % 2) + l] |= static_cast<uint8_t>((v & 15) << (j < 2 ? 0 : 4));
        y[b].qh[32 * h + l] |= static_cast<uint8_t>((v >> 4) << (2 * j));
      }
    }
  }
}

void QuantizeIQ4_XS(const float* x, BlockIQ4_XS* y, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    float step[8];
    for (int s = 0; s < 8; ++s) step[s] = SignedAbsMax(x + 32 * s, 32) / -127.f;
    const float largest = LargestScale(step, 8);
    y[b].d = F32ToF16(largest / -32.f);
    const float d = F16ToF32(y[b].d);
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].scales_h = 0;
    std::memset(y[b].scales_l, 0, sizeof(y[b].scales_l));
    for (int s = 0; s < 8; ++s) {
      const int l = Clamp(NearestInt(id * step[s]), -32, 31);
      const int ls = l + 32;
      y[b].scales_l[s / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (s % 2)));
      y[b].scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * s));
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.f ? 1.f / dl : 0.f;
      const float* xs = x + 32 * s;
      for (int i = 0; i < 16; ++i) {
        y[b].qs[16 * s + i] =
            static_cast<uint8_t>(NearestIq4(xs[i] * idl) | NearestIq4(xs[i + 16] * idl) << 4);
      }
    }
  }
}

}  // namespace

bool QuantizeGgmlRow(DType t, const float* x, void* y, int64_t n) {
  switch (t) {
    case DType::kQ4_1:
      QuantizeQ4_1(x, static_cast<BlockQ4_1*>(y), n);
      return true;
    case DType::kQ5_0:
      QuantizeQ5_0(x, static_cast<BlockQ5_0*>(y), n);
      return true;
    case DType::kQ5_1:
      QuantizeQ5_1(x, static_cast<BlockQ5_1*>(y), n);
      return true;
    case DType::kQ2_K:
      QuantizeQ2_K(x, static_cast<BlockQ2_K*>(y), n);
      return true;
    case DType::kQ3_K:
      QuantizeQ3_K(x, static_cast<BlockQ3_K*>(y), n);
      return true;
    case DType::kQ4_K:
      QuantizeQ4_K(x, static_cast<BlockQ4_K*>(y), n);
      return true;
    case DType::kQ5_K:
      QuantizeQ5_K(x, static_cast<BlockQ5_K*>(y), n);
      return true;
    case DType::kQ6_K:
      QuantizeQ6_K(x, static_cast<BlockQ6_K*>(y), n);
      return true;
    case DType::kIQ4_NL:
      QuantizeIQ4_NL(x, static_cast<BlockIQ4_NL*>(y), n);
      return true;
    case DType::kIQ4_XS:
      QuantizeIQ4_XS(x, static_cast<BlockIQ4_XS*>(y), n);
      return true;
    default:
      return false;
  }
}

}  // namespace specd
