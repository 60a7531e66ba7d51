// A non-owning view of a tensor's bytes with its name, dtype and shape.
//
// Shapes are row-major and outermost first, as in PyTorch/safetensors: a
// linear layer's weight is (out_features, in_features), so row i holds the
// weights producing output i. GGUF lists dims innermost first; the loader
// reverses them, so the same matrix has the same shape from either format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace specd {

// How a matrix's bytes are arranged. kRows: the file's row-major rows (row()
// addresses them). kRows16: Q4_0 / Q8_0 / BF16 rows repacked at load in
// interleaved groups of 16 (kernels::RepackForMatMul; kernels/cpu/
// quant_rows16.h, bf16_rows16.h), the
// same bytes in all; only kernels::MatMul / MatMulRows read it, and row()
// addresses a row only at multiples of 16 (the start of its group).
enum class WeightLayout : uint8_t { kRows, kRows16 };

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // not owned
  size_t nbytes = 0;
  WeightLayout layout = WeightLayout::kRows;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t rows() const { return shape.size() >= 2 ? numel() / shape.back() : 1; }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  size_t row_bytes() const { return RowBytes(dtype, cols()); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes();
  }
};

// "[2048, 8192]"
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace specd
