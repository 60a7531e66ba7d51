// Portable scalar Q4_BF16 kernel and the per-ISA choice (int4_kernels.h).
#include <cstring>

#include "kernels/cpu/int4_kernels.h"
#include "tensor/dtype.h"

namespace specd::kernels::cpu {

void Int4RowsScalar(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                    const float* x, int n_tokens, float* y, int64_t ldy) {
  const int64_t nb = k / kQuantBlock;
  float wv[kQuantBlock];
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_BF16*>(w + r * row_bytes);
    for (int t = 0; t < n_tokens; ++t) y[t * ldy + r] = 0.f;
    for (int64_t b = 0; b < nb; ++b) {
      // Exact in f32 (tensor/dtype.h): unpacked once for every token.
      const float d = BF16ToF32(blocks[b].d);
      for (int i = 0; i < kQuantBlock / 2; ++i) {
        wv[i] = d * static_cast<float>((blocks[b].qs[i] & 0xf) - 8);
        wv[i + 16] = d * static_cast<float>((blocks[b].qs[i] >> 4) - 8);
      }
      for (int t = 0; t < n_tokens; ++t) {
        const float* xb = x + t * k + b * kQuantBlock;
        float acc = y[t * ldy + r];
        for (int i = 0; i < kQuantBlock; ++i) acc += wv[i] * xb[i];
        y[t * ldy + r] = acc;
      }
    }
  }
}

Int4RowsFn Int4Rows(QuantDotIsa isa) {
  Int4RowsFn fn = nullptr;
  switch (isa) {
    case QuantDotIsa::kAvx512Vnni: fn = Int4RowsAvx512(); break;
    case QuantDotIsa::kAvx2:
    case QuantDotIsa::kAvxVnni: fn = Int4RowsAvx2(); break;
    case QuantDotIsa::kScalar: break;
  }
  return fn != nullptr ? fn : Int4RowsScalar;
}

}  // namespace specd::kernels::cpu
