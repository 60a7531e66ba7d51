// Dequantize-then-F32 matmul of the ggml block types (dequant_matmul.h).
#include "kernels/cpu/dequant_matmul.h"

#include <algorithm>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// Floats of dequantized rows per group: 128 KiB, so a group stays in L2
// while MatRowsF32 passes over it once per token tile. Every group size gives
// the same outputs.
constexpr int64_t kScratchFloats = 32 * 1024;
constexpr int64_t kMaxGroupRows = 16;

template <DType T>
void Portable(const uint8_t* src, float* dst, int64_t n) {
  DequantizeRow(T, src, dst, n);
}

}  // namespace

bool IsDequantMatMulType(DType t) {
  switch (t) {
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

DequantRowFn DequantRowPortable(DType t) {
  switch (t) {
    case DType::kQ4_1:
      return Portable<DType::kQ4_1>;
    case DType::kQ5_0:
      return Portable<DType::kQ5_0>;
    case DType::kQ5_1:
      return Portable<DType::kQ5_1>;
    case DType::kQ2_K:
      return Portable<DType::kQ2_K>;
    case DType::kQ3_K:
      return Portable<DType::kQ3_K>;
    case DType::kQ4_K:
      return Portable<DType::kQ4_K>;
    case DType::kQ5_K:
      return Portable<DType::kQ5_K>;
    case DType::kQ6_K:
      return Portable<DType::kQ6_K>;
    case DType::kIQ4_NL:
      return Portable<DType::kIQ4_NL>;
    case DType::kIQ4_XS:
      return Portable<DType::kIQ4_XS>;
    default:
      return nullptr;
  }
}

DequantRowFn DequantRowFor(DType t, QuantDotIsa isa) {
  DequantRowFn fn = isa != QuantDotIsa::kScalar ? DequantRowAvx2(t) : nullptr;
  return fn != nullptr ? fn : DequantRowPortable(t);
}

void DequantMatRows(DequantRowFn dequant, const uint8_t* w, size_t row_bytes, int64_t n_rows,
                    int64_t k, const float* x, int n_tokens, float* y, int64_t ldy,
                    const DecodeReads& reads) {
  thread_local std::vector<float> scratch;  // (group rows, k)
  const int64_t group =
      std::clamp<int64_t>(kScratchFloats / std::max<int64_t>(k, 1), 1, kMaxGroupRows);
  scratch.resize(static_cast<size_t>(std::min(group, n_rows) * k));
  for (int64_t r0 = 0; r0 < n_rows; r0 += group) {
    const int64_t nr = std::min(group, n_rows - r0);
    for (int64_t r = 0; r < nr; ++r) dequant(w + (r0 + r) * row_bytes, scratch.data() + r * k, k);
    MatRowsF32(reinterpret_cast<const uint8_t*>(scratch.data()), static_cast<size_t>(k) * 4, nr, k,
               x, n_tokens, y + r0, ldy, reads);
  }
}

}  // namespace specd::kernels::cpu
