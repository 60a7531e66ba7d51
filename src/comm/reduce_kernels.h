// Element-wise reduction and RMSNorm loops used by every Communicator backend.
//
// Determinism contract: SumRanks adds the sources strictly in the order given
// (srcs[0] + srcs[1] + ... + srcs[n-1], left to right, per element), so every
// rank that passes the same sources in rank order gets bitwise-identical
// results, whatever ISA clone runs. bf16 inputs are widened to f32, summed in
// f32 and rounded to bf16 once (round to nearest even).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specd::comm_internal {

// out[i] = srcs[0][i] + ... + srcs[n_src-1][i] for i < count.
// out may alias srcs[0] (and only srcs[0]). REQUIRES: n_src >= 1.
void SumRanksF32(const float* const* srcs, int n_src, float* out, size_t count);
void SumRanksBF16(const uint16_t* const* srcs, int n_src, uint16_t* out, size_t count);

// Fused tail for one row of `dim` f32, in this exact order:
//   residual[i] = residual[i] + summed[i]
//   out[i] = residual[i] * (1 / sqrt(mean(residual^2) + eps)) * weight[i]
// summed/out may alias each other; residual must not alias out.
void ResidualRmsNormRow(const float* summed, float* residual, const float* weight, float eps,
                        int dim, float* out);

inline float BF16ToF32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline uint16_t F32ToBF16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace specd::comm_internal
