#include "tensor/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace specd {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kI8: return "i8";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
    case DType::kQ4_BF16: return "q4_bf16";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kIQ4_XS: return "iq4_xs";
  }
  return "?";
}

StatusOr<DType> ParseDType(std::string_view name) {
  for (int t = 0; t <= static_cast<int>(DType::kIQ4_XS); ++t) {
    if (name == DTypeName(static_cast<DType>(t))) return static_cast<DType>(t);
  }
  return InvalidArgumentError("unknown dtype '" + std::string(name) +
                              "': expected f32, f16, bf16, q8_0, q4_0, q4_bf16, q4_1, q5_0, q5_1, "
                              "q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl or iq4_xs");
}

int DTypeBlockElems(DType t) {
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return kSuperBlock;
    default:
      return IsQuantized(t) ? kQuantBlock : 1;
  }
}

size_t DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kI8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kBool: return 1;
    case DType::kQ4_BF16: return sizeof(BlockQ4_BF16);
    case DType::kQ4_1: return sizeof(BlockQ4_1);
    case DType::kQ5_0: return sizeof(BlockQ5_0);
    case DType::kQ5_1: return sizeof(BlockQ5_1);
    case DType::kQ2_K: return sizeof(BlockQ2_K);
    case DType::kQ3_K: return sizeof(BlockQ3_K);
    case DType::kQ4_K: return sizeof(BlockQ4_K);
    case DType::kQ5_K: return sizeof(BlockQ5_K);
    case DType::kQ6_K: return sizeof(BlockQ6_K);
    case DType::kIQ4_NL: return sizeof(BlockIQ4_NL);
    case DType::kIQ4_XS: return sizeof(BlockIQ4_XS);
  }
  return 0;
}

bool IsQuantized(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI8:
    case DType::kI32:
    case DType::kI64:
    case DType::kBool:
      return false;
    default:
      return true;
  }
}

int BlockHalfOffsets(DType t, int* offsets) {
  auto set = [offsets](size_t a, int n = 1, size_t b = 0) {
    offsets[0] = static_cast<int>(a);
    if (n == 2) offsets[1] = static_cast<int>(b);
    return n;
  };
  switch (t) {
    case DType::kQ8_0: return set(offsetof(BlockQ8_0, d));
    case DType::kQ4_0: return set(offsetof(BlockQ4_0, d));
    case DType::kQ5_0: return set(offsetof(BlockQ5_0, d));
    case DType::kIQ4_NL: return set(offsetof(BlockIQ4_NL, d));
    case DType::kIQ4_XS: return set(offsetof(BlockIQ4_XS, d));
    case DType::kQ3_K: return set(offsetof(BlockQ3_K, d));
    case DType::kQ6_K: return set(offsetof(BlockQ6_K, d));
    case DType::kQ4_1: return set(offsetof(BlockQ4_1, d), 2, offsetof(BlockQ4_1, m));
    case DType::kQ5_1: return set(offsetof(BlockQ5_1, d), 2, offsetof(BlockQ5_1, m));
    case DType::kQ2_K: return set(offsetof(BlockQ2_K, d), 2, offsetof(BlockQ2_K, dmin));
    case DType::kQ4_K: return set(offsetof(BlockQ4_K, d), 2, offsetof(BlockQ4_K, dmin));
    case DType::kQ5_K: return set(offsetof(BlockQ5_K, d), 2, offsetof(BlockQ5_K, dmin));
    default: return 0;
  }
}

float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000 | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (abs < 0x38800000) {                                              // subnormal or zero
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t r = abs + 0xfff + ((abs >> 13) & 1);  // round to nearest even
  return static_cast<uint16_t>(sign | ((r - (112u << 23)) >> 13));
}

void QuantizeRowQ8_0(const float* x, BlockQ8_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.f;
    for (int i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    float d = amax / 127.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    out[b].d = F32ToF16(d);
    for (int i = 0; i < kQuantBlock; ++i) out[b].qs[i] = static_cast<int8_t>(std::lround(xb[i] * id));
  }
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.f, max = 0.f;
    for (int i = 0; i < kQuantBlock; ++i) {
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        max = xb[i];
      }
    }
    float d = max / -8.f;
    float id = d != 0.f ? 1.f / d : 0.f;
    out[b].d = F32ToF16(d);
    for (int i = 0; i < kQuantBlock / 2; ++i) {
      int q0 = std::min(15, static_cast<int>(xb[i] * id + 8.5f));
      int q1 = std::min(15, static_cast<int>(xb[i + 16] * id + 8.5f));
      out[b].qs[i] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ4_BF16(const uint16_t* x, BlockQ4_BF16* out, int64_t n) {
  // bf16 machine epsilon (torch.finfo(torch.bfloat16).eps): the library's
  // replacement for a zero scale.
  constexpr uint16_t kBf16Eps = 0x3c00;  // 2^-7
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const uint16_t* xb = x + b * kQuantBlock;
    // min(amin, 0) and max(amax, 0), then the larger magnitude: max |x|.
    float amax = 0.f;
    for (int i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(BF16ToF32(xb[i])));
    uint16_t d = F32ToBF16(amax / 7.5f);
    if (BF16ToF32(d) == 0.f) d = kBf16Eps;
    const float df = BF16ToF32(d);
    int q[kQuantBlock];
    for (int i = 0; i < kQuantBlock; ++i) {
      const float v = std::clamp(BF16ToF32(F32ToBF16(BF16ToF32(xb[i]) / df)), -8.f, 7.f);
      // nearbyint rounds half to even, as torch.round; a NaN (from a NaN or
      // infinite input) is stored as 0.
      q[i] = std::isnan(v) ? 0 : static_cast<int>(std::nearbyint(v));
    }
    out[b].d = d;
    for (int i = 0; i < kQuantBlock / 2; ++i) {
      out[b].qs[i] = static_cast<uint8_t>((q[i] + 8) | ((q[i + 16] + 8) << 4));
    }
  }
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
      return;
    }
    case DType::kBF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(s[i]);
      return;
    }
    case DType::kQ8_0: {
      auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t j = 0; j < n / kQuantBlock; ++j) {
        float d = F16ToF32(b[j].d);
        for (int i = 0; i < kQuantBlock; ++i) dst[j * kQuantBlock + i] = d * b[j].qs[i];
      }
      return;
    }
    case DType::kQ4_0: {
      auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t j = 0; j < n / kQuantBlock; ++j) {
        float d = F16ToF32(b[j].d);
        for (int i = 0; i < kQuantBlock / 2; ++i) {
          dst[j * kQuantBlock + i] = d * ((b[j].qs[i] & 0xf) - 8);
          dst[j * kQuantBlock + i + 16] = d * ((b[j].qs[i] >> 4) - 8);
        }
      }
      return;
    }
    case DType::kQ4_BF16: {
      auto* b = static_cast<const BlockQ4_BF16*>(src);
      for (int64_t j = 0; j < n / kQuantBlock; ++j) {
        float d = BF16ToF32(b[j].d);
        for (int i = 0; i < kQuantBlock / 2; ++i) {
          dst[j * kQuantBlock + i] = d * static_cast<float>((b[j].qs[i] & 0xf) - 8);
          dst[j * kQuantBlock + i + 16] = d * static_cast<float>((b[j].qs[i] >> 4) - 8);
        }
      }
      return;
    }
    case DType::kQ4_1: DequantizeQ4_1(static_cast<const BlockQ4_1*>(src), dst, n); return;
    case DType::kQ5_0: DequantizeQ5_0(static_cast<const BlockQ5_0*>(src), dst, n); return;
    case DType::kQ5_1: DequantizeQ5_1(static_cast<const BlockQ5_1*>(src), dst, n); return;
    case DType::kQ2_K: DequantizeQ2_K(static_cast<const BlockQ2_K*>(src), dst, n); return;
    case DType::kQ3_K: DequantizeQ3_K(static_cast<const BlockQ3_K*>(src), dst, n); return;
    case DType::kQ4_K: DequantizeQ4_K(static_cast<const BlockQ4_K*>(src), dst, n); return;
    case DType::kQ5_K: DequantizeQ5_K(static_cast<const BlockQ5_K*>(src), dst, n); return;
    case DType::kQ6_K: DequantizeQ6_K(static_cast<const BlockQ6_K*>(src), dst, n); return;
    case DType::kIQ4_NL: DequantizeIQ4_NL(static_cast<const BlockIQ4_NL*>(src), dst, n); return;
    case DType::kIQ4_XS: DequantizeIQ4_XS(static_cast<const BlockIQ4_XS*>(src), dst, n); return;
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = 0.f;
  }
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToF16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToBF16(src[i]);
      return;
    }
    case DType::kQ8_0:
      QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n);
      return;
    case DType::kQ4_0:
      QuantizeRowQ4_0(src, static_cast<BlockQ4_0*>(dst), n);
      return;
    case DType::kQ4_BF16: {
      std::vector<uint16_t> row(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) row[i] = F32ToBF16(src[i]);
      QuantizeRowQ4_BF16(row.data(), static_cast<BlockQ4_BF16*>(dst), n);
      return;
    }
    default:
      QuantizeGgmlRow(t, src, dst, n);
      return;
  }
}

}  // namespace specd
