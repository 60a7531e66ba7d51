// BF16 weights repacked at load for the AVX512-BF16 path: 16 rows interleaved,
// so one vdpbf16ps advances 16 rows' dot products with one broadcast
// activation pair, and a row's sum needs no horizontal reduction per token.
// Internal to the kernels module.
//
// Layout (same bytes as the rows it replaces): a matrix of R rows
// (R % 16 == 0) and K columns (K even; np = K / 2 element pairs) is R / 16
// groups of 16 * K * 2 bytes, group g holding rows 16g .. 16g + 15 as np
// chunks of 64 bytes, chunk = one pair p: dword r = (W[r, 2p], W[r, 2p + 1]).
// The chunks run in the order the kernel reads them (Bf16Rows16Order):
//   pair p = 16 v + l (vector v, lane l of the row-major kernel's vectors);
//   for lane block b in 0, 2, 1, 3 (lanes 4b .. 4b + 3):
//     for v = 0, 1, ... : the pairs 16 v + l of the block's lanes (those < np).
// A group is one sequential stream at any token count.
//
// Summation order: that of MatRowsBF16Avx512 (bf16_avx512.h), so a repacked
// matrix gives bitwise the outputs of the rows it replaces: per row and token,
// accumulator (c, l) chains the pairs 16 v + l of vectors v = c mod 2 in
// increasing v (one vdpbf16ps each: odd element first, round to nearest even,
// denormals flushed); where a last vector is partial, its missing lanes get a
// vdpbf16ps of zeros (the row kernel's masked tail); then s_l = acc(0, l) +
// acc(1, l) and y = ((s_i + s_i+8) + (s_i+4 + s_i+12)) ... as ReduceAdd512
// (avx512_common.h): lanes i + 8, then + 4, + 2, + 1.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specd::kernels::cpu {

// For each chunk of a group of np pairs in layout order: fn(pair index).
template <typename Fn>
void Bf16Rows16Order(int64_t np, Fn&& fn) {
  const int64_t nv = (np + 15) / 16;
  for (int b : {0, 2, 1, 3}) {
    for (int64_t v = 0; v < nv; ++v) {
      for (int l = 4 * b; l < 4 * b + 4; ++l) {
        if (16 * v + l < np) fn(16 * v + l);
      }
    }
  }
}

// Rewrites rows [0, rows) of bf16 data (k columns) in the layout above, in
// place. REQUIRES: rows % 16 == 0, k % 2 == 0.
void RepackBf16Rows16(uint8_t* data, int64_t rows, int64_t k);

// y[t * ldy + r] for rows r < n_groups * 16 of the repacked `w` (k columns)
// and tokens t < n_tokens; xb: bf16 activations, token t at xb + t * ldx
// (ldx even). prefetch: prefetch ahead in the group stream in software.
using Bf16Rows16Fn = void (*)(const uint8_t* w, int64_t n_groups, int64_t k, const uint16_t* xb,
                              int64_t ldx, int n_tokens, float* y, int64_t ldy, bool prefetch);
// The portable kernel (any CPU; the summation order above, vdpbf16ps
// emulated), and the AVX512-BF16 one (null off x86).
void Bf16Rows16Scalar(const uint8_t* w, int64_t n_groups, int64_t k, const uint16_t* xb,
                      int64_t ldx, int n_tokens, float* y, int64_t ldy, bool prefetch);
Bf16Rows16Fn Bf16Rows16Avx512();

// bf16(x[i]) (nearest even, as vcvtneps2bf16: denormals to signed zero, NaN
// quiet) for i < n, zero for n <= i < n_padded. Portable.
void ConvertToBF16Scalar(const float* x, int64_t n, int64_t n_padded, uint16_t* out);

}  // namespace specd::kernels::cpu
