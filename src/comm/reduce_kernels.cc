#include "comm/reduce_kernels.h"

#include <cmath>
#include <cstring>

// The loops below are written so the compiler vectorizes them (fixed-size
// blocks into a local accumulator, which cannot alias the sources), and
// `target_clones` builds AVX-512, AVX2 and baseline copies chosen at load time
// by the CPU. Vectorizing across elements never reorders the per-element sum
// over ranks, so all clones give bitwise-identical results.
#pragma GCC optimize("O3")

namespace specd::comm_internal {
namespace {

constexpr size_t kBlock = 512;

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define SPECD_COMM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SPECD_COMM_CLONES
#endif

}  // namespace

SPECD_COMM_CLONES
void SumRanksF32(const float* const* srcs, int n_src, float* out, size_t count) {
  float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = count - base < kBlock ? count - base : kBlock;
    const float* s0 = srcs[0] + base;
    for (size_t i = 0; i < n; ++i) acc[i] = s0[i];
    for (int r = 1; r < n_src; ++r) {
      const float* s = srcs[r] + base;
      for (size_t i = 0; i < n; ++i) acc[i] += s[i];
    }
    std::memcpy(out + base, acc, n * sizeof(float));
  }
}

SPECD_COMM_CLONES
void SumRanksBF16(const uint16_t* const* srcs, int n_src, uint16_t* out, size_t count) {
  float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = count - base < kBlock ? count - base : kBlock;
    const uint16_t* s0 = srcs[0] + base;
    for (size_t i = 0; i < n; ++i) acc[i] = BF16ToF32(s0[i]);
    for (int r = 1; r < n_src; ++r) {
      const uint16_t* s = srcs[r] + base;
      for (size_t i = 0; i < n; ++i) acc[i] += BF16ToF32(s[i]);
    }
    uint16_t* o = out + base;
    for (size_t i = 0; i < n; ++i) o[i] = F32ToBF16(acc[i]);
  }
}

SPECD_COMM_CLONES
void ResidualRmsNormRow(const float* summed, float* residual, const float* weight, float eps,
                        int dim, float* out) {
  // Sum of squares in 16 interleaved lanes (a fixed order, so deterministic),
  // accumulated in f32.
  float lanes[16] = {};
  int i = 0;
  for (; i + 16 <= dim; i += 16) {
    for (int j = 0; j < 16; ++j) {
      float v = residual[i + j] + summed[i + j];
      residual[i + j] = v;
      lanes[j] += v * v;
    }
  }
  float tail = 0.0f;
  for (; i < dim; ++i) {
    float v = residual[i] + summed[i];
    residual[i] = v;
    tail += v * v;
  }
  float ss = tail;
  for (int j = 0; j < 16; ++j) ss += lanes[j];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  for (int k = 0; k < dim; ++k) out[k] = residual[k] * scale * weight[k];
}

}  // namespace specd::comm_internal
