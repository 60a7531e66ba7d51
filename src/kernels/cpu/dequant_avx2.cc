// AVX2 dequantizers of the ggml block types (dequant_matmul.h): the values of
// DequantizeRow bit for bit. The scales are computed in scalar code exactly
// as there (F16ToF32, one f32 product); the quants are unpacked 32 at a time
// into int8 lanes, widened to f32 (exact) and scaled with the same separate
// multiply and add/subtract. The functions are compiled for AVX2 without FMA,
// so the compiler cannot fuse them into one rounding.
#include "kernels/cpu/dequant_matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "tensor/ggml_blocks.h"

namespace specd::kernels::cpu {
namespace {

#define SPECD_DEQUANT_AVX2 __attribute__((target("avx2")))

enum class Offset { kNone, kAdd, kSub };

// y[0..16) = s * q[i] (+ or - m) for 16 int8 quants.
template <Offset O>
SPECD_DEQUANT_AVX2 inline void Emit16(__m128i q, float s, float m, float* y) {
  const __m256 sv = _mm256_set1_ps(s);
  __m256 lo = _mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  __m256 hi = _mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))));
  if constexpr (O == Offset::kAdd) {
    lo = _mm256_add_ps(lo, _mm256_set1_ps(m));
    hi = _mm256_add_ps(hi, _mm256_set1_ps(m));
  } else if constexpr (O == Offset::kSub) {
    lo = _mm256_sub_ps(lo, _mm256_set1_ps(m));
    hi = _mm256_sub_ps(hi, _mm256_set1_ps(m));
  }
  _mm256_storeu_ps(y, lo);
  _mm256_storeu_ps(y + 8, hi);
}

template <Offset O>
SPECD_DEQUANT_AVX2 inline void Emit32(__m256i q, float s, float m, float* y) {
  Emit16<O>(_mm256_castsi256_si128(q), s, m, y);
  Emit16<O>(_mm256_extracti128_si256(q, 1), s, m, y + 16);
}

// Bytes (v >> shift) & mask of 32 bytes (shift < 8).
SPECD_DEQUANT_AVX2 inline __m256i Bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}
SPECD_DEQUANT_AVX2 inline __m128i Bits(__m128i v, int shift, int mask) {
  return _mm_and_si128(_mm_srli_epi16(v, shift), _mm_set1_epi8(static_cast<char>(mask)));
}

SPECD_DEQUANT_AVX2 inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
SPECD_DEQUANT_AVX2 inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// Byte i of the result is 0x10 if bit i of the 16-bit value bits is set,
// else 0 (i < 16): the fifth bits of Q5_0 / Q5_1.
SPECD_DEQUANT_AVX2 inline __m128i FifthBits(uint32_t bits) {
  const __m128i spread =
      _mm_shuffle_epi8(_mm_set1_epi32(static_cast<int>(bits)),
                       _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i mask = _mm_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(spread, mask), mask);
  return _mm_and_si128(set, _mm_set1_epi8(0x10));
}

SPECD_DEQUANT_AVX2 inline __m128i Iq4Table() {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
}

SPECD_DEQUANT_AVX2 void DequantQ4_1(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ4_1*>(src);
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d), m = F16ToF32(b[j].m);
    const __m128i qs = Load16(b[j].qs);
    Emit16<Offset::kAdd>(Bits(qs, 0, 15), d, m, y);
    Emit16<Offset::kAdd>(Bits(qs, 4, 15), d, m, y + 16);
  }
}

SPECD_DEQUANT_AVX2 void DequantQ5_0(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ5_0*>(src);
  const __m128i sixteen = _mm_set1_epi8(16);
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d);
    uint32_t qh;
    std::memcpy(&qh, b[j].qh, 4);
    const __m128i qs = Load16(b[j].qs);
    const __m128i lo = _mm_or_si128(Bits(qs, 0, 15), FifthBits(qh & 0xffff));
    const __m128i hi = _mm_or_si128(Bits(qs, 4, 15), FifthBits(qh >> 16));
    Emit16<Offset::kNone>(_mm_sub_epi8(lo, sixteen), d, 0.f, y);
    Emit16<Offset::kNone>(_mm_sub_epi8(hi, sixteen), d, 0.f, y + 16);
  }
}

SPECD_DEQUANT_AVX2 void DequantQ5_1(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ5_1*>(src);
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d), m = F16ToF32(b[j].m);
    uint32_t qh;
    std::memcpy(&qh, b[j].qh, 4);
    const __m128i qs = Load16(b[j].qs);
    Emit16<Offset::kAdd>(_mm_or_si128(Bits(qs, 0, 15), FifthBits(qh & 0xffff)), d, m, y);
    Emit16<Offset::kAdd>(_mm_or_si128(Bits(qs, 4, 15), FifthBits(qh >> 16)), d, m, y + 16);
  }
}

SPECD_DEQUANT_AVX2 void DequantIQ4_NL(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockIQ4_NL*>(src);
  const __m128i table = Iq4Table();
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d);
    const __m128i qs = Load16(b[j].qs);
    Emit16<Offset::kNone>(_mm_shuffle_epi8(table, Bits(qs, 0, 15)), d, 0.f, y);
    Emit16<Offset::kNone>(_mm_shuffle_epi8(table, Bits(qs, 4, 15)), d, 0.f, y + 16);
  }
}

SPECD_DEQUANT_AVX2 void DequantIQ4_XS(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockIQ4_XS*>(src);
  const __m128i table = Iq4Table();
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d);
    for (int s = 0; s < 8; ++s, y += 32) {
      const int ls =
          ((b[j].scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((b[j].scales_h >> (2 * s)) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const __m128i qs = Load16(b[j].qs + 16 * s);
      Emit16<Offset::kNone>(_mm_shuffle_epi8(table, Bits(qs, 0, 15)), dl, 0.f, y);
      Emit16<Offset::kNone>(_mm_shuffle_epi8(table, Bits(qs, 4, 15)), dl, 0.f, y + 16);
    }
  }
}

SPECD_DEQUANT_AVX2 void DequantQ2_K(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(src);
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d), dmin = F16ToF32(b[j].dmin);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = Load32(b[j].qs + 32 * h);
      for (int jj = 0; jj < 4; ++jj, y += 32) {
        const __m256i q = Bits(qs, 2 * jj, 3);
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b[j].scales[8 * h + 2 * jj + half];
          const float dl = d * static_cast<float>(sc & 15), ml = dmin * static_cast<float>(sc >> 4);
          const __m128i q16 =
              half == 0 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
          Emit16<Offset::kSub>(q16, dl, ml, y + 16 * half);
        }
      }
    }
  }
}

SPECD_DEQUANT_AVX2 void DequantQ3_K(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(src);
  int8_t sc[16];
  const __m256i four = _mm256_set1_epi8(4);
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d);
    UnpackQ3KScales(b[j].scales, sc);
    const __m256i hmask = Load32(b[j].hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = Load32(b[j].qs + 32 * h);
      for (int jj = 0; jj < 4; ++jj, y += 32) {
        const int bit = 4 * h + jj;
        // low - 4 + 4 * high bit: low - (high bit ? 0 : 4).
        const __m256i high = _mm256_slli_epi16(Bits(hmask, bit, 1), 2);
        const __m256i q = _mm256_sub_epi8(_mm256_add_epi8(Bits(qs, 2 * jj, 3), high), four);
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(sc[8 * h + 2 * jj + half]);
          const __m128i q16 =
              half == 0 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
          Emit16<Offset::kNone>(q16, dl, 0.f, y + 16 * half);
        }
      }
    }
  }
}

SPECD_DEQUANT_AVX2 void DequantQ4_K(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ4_K*>(src);
  uint8_t sc[8], mn[8];
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d), dmin = F16ToF32(b[j].dmin);
    UnpackKScales(b[j].scales, sc, mn);
    for (int p = 0; p < 4; ++p) {
      const __m256i qs = Load32(b[j].qs + 32 * p);
      for (int half = 0; half < 2; ++half, y += 32) {
        const int s = 2 * p + half;
        const float ds = d * static_cast<float>(sc[s]), ms = dmin * static_cast<float>(mn[s]);
        Emit32<Offset::kSub>(Bits(qs, 4 * half, 15), ds, ms, y);
      }
    }
  }
}

SPECD_DEQUANT_AVX2 void DequantQ5_K(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ5_K*>(src);
  uint8_t sc[8], mn[8];
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d), dmin = F16ToF32(b[j].dmin);
    UnpackKScales(b[j].scales, sc, mn);
    const __m256i qh = Load32(b[j].qh);
    for (int p = 0; p < 4; ++p) {
      const __m256i qs = Load32(b[j].qs + 32 * p);
      for (int half = 0; half < 2; ++half, y += 32) {
        const int s = 2 * p + half;
        const float ds = d * static_cast<float>(sc[s]), ms = dmin * static_cast<float>(mn[s]);
        const __m256i q =
            _mm256_or_si256(Bits(qs, 4 * half, 15), _mm256_slli_epi16(Bits(qh, s, 1), 4));
        Emit32<Offset::kSub>(q, ds, ms, y);
      }
    }
  }
}

SPECD_DEQUANT_AVX2 void DequantQ6_K(const uint8_t* src, float* y, int64_t n) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
  const __m256i thirty_two = _mm256_set1_epi8(32);
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d);
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = Load32(b[j].qh + 32 * h);
      for (int jj = 0; jj < 4; ++jj, y += 32) {
        const __m256i ql = Load32(b[j].ql + 64 * h + 32 * (jj % 2));
        const __m256i lo = Bits(ql, jj < 2 ? 0 : 4, 15);
        const __m256i hi = _mm256_slli_epi16(Bits(qh, 2 * jj, 3), 4);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), thirty_two);
        for (int half = 0; half < 2; ++half) {
          const float ds = d * static_cast<float>(b[j].scales[8 * h + 2 * jj + half]);
          const __m128i q16 =
              half == 0 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
          Emit16<Offset::kNone>(q16, ds, 0.f, y + 16 * half);
        }
      }
    }
  }
}

}  // namespace

DequantRowFn DequantRowAvx2(DType t) {
  switch (t) {
    case DType::kQ4_1:
      return DequantQ4_1;
    case DType::kQ5_0:
      return DequantQ5_0;
    case DType::kQ5_1:
      return DequantQ5_1;
    case DType::kQ2_K:
      return DequantQ2_K;
    case DType::kQ3_K:
      return DequantQ3_K;
    case DType::kQ4_K:
      return DequantQ4_K;
    case DType::kQ5_K:
      return DequantQ5_K;
    case DType::kQ6_K:
      return DequantQ6_K;
    case DType::kIQ4_NL:
      return DequantIQ4_NL;
    case DType::kIQ4_XS:
      return DequantIQ4_XS;
    default:
      return nullptr;
  }
}

}  // namespace specd::kernels::cpu

#else

namespace specd::kernels::cpu {
DequantRowFn DequantRowAvx2(DType t) { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
