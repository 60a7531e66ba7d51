// AVX2 and AVX-VNNI Q8_0 / Q4_0 kernels (256-bit), compiled with function
// target attributes so the library itself stays baseline x86-64; which one
// runs is decided at run time by the platform probe.
#include "kernels/cpu/quant_kernels.h"
#include "tensor/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace specd::kernels::cpu {
namespace {

#define SPECD_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

// Quantizes one row of activations (see ref::QuantizeActivationsQ8): the
// conversion rounds half to even (MXCSR default) like nearbyint.
SPECD_AVX2_TARGET void QuantizeRowAvx2(const float* x, int64_t k, int corr_offset, int8_t* qs,
                                       float* d, int32_t* corr) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i neg_offset = _mm256_set1_epi32(-corr_offset);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
    __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs_mask), _mm256_and_ps(v1, abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v2, abs_mask), _mm256_and_ps(v3, abs_mask)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    float db = amax / 127.f;
    float id = db != 0.f ? 1.f / db : 0.f;
    d[b] = db;
    __m256 vid = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
    // Packing works within 128-bit lanes; the permute restores element order.
    __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    q = _mm256_permutevar8x32_epi32(q, perm);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + b * 32), q);
    if (corr_offset != 0) {
      __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + b * 8),
                          _mm256_mullo_epi32(sums, neg_offset));
    }
  }
}

namespace avx2 {
#define QTARGET SPECD_AVX2_TARGET
#define QDOT(acc, u, s) \
  _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#include "kernels/cpu/quant_avx2.inc"
#undef QDOT
#undef QTARGET
}  // namespace avx2

namespace avxvnni {
#define QTARGET __attribute__((target("avxvnni,avx2,fma,f16c")))
#define QDOT(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#include "kernels/cpu/quant_avx2.inc"
#undef QDOT
#undef QTARGET
}  // namespace avxvnni

}  // namespace

// Shared with the AVX512 table (its quantizer needs nothing wider).
QuantizeRowFn QuantizeRowAvx2Fn() { return QuantizeRowAvx2; }

const QuantKernelTable* QuantKernelsAvx2() {
  static const QuantKernelTable table = [] {
    QuantKernelTable t;
    t.quantize = QuantizeRowAvx2;
    t.q8_0 = avx2::RowsQ8;
    t.q4_0 = avx2::RowsQ4;
    t.q4_0_corr_offset = 8;
    return t;
  }();
  return &table;
}

const QuantKernelTable* QuantKernelsAvxVnni() {
  static const QuantKernelTable table = [] {
    QuantKernelTable t;
    t.quantize = QuantizeRowAvx2;
    t.q8_0 = avxvnni::RowsQ8;
    t.q4_0 = avxvnni::RowsQ4;
    t.q4_0_corr_offset = 8;
    return t;
  }();
  return &table;
}

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
QuantizeRowFn QuantizeRowAvx2Fn() { return nullptr; }
const QuantKernelTable* QuantKernelsAvx2() { return nullptr; }
const QuantKernelTable* QuantKernelsAvxVnni() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
