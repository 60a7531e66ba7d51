// Random weights and activations shared by the matmul tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/tensor_view.h"

namespace specd::kernels {

struct Weights {
  std::vector<uint8_t> bytes;
  TensorView view;
  std::vector<float> deq;  // (rows, cols) dequantized, what the reference multiplies
};

inline Weights MakeWeights(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  Weights w;
  const size_t row_bytes = RowBytes(dtype, cols);
  w.bytes.resize(row_bytes * rows);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    // Vary the row scale so per-block scales differ across rows.
    float scale = 0.02f * (1 + r % 5);
    for (auto& v : row) v = dist(rng) * scale;
    QuantizeRow(dtype, row.data(), w.bytes.data() + r * row_bytes, cols);
  }
  w.view.name = std::string("test.") + DTypeName(dtype);
  w.view.dtype = dtype;
  w.view.shape = {rows, cols};
  w.view.data = w.bytes.data();
  w.view.nbytes = w.bytes.size();
  w.deq.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    DequantizeRow(dtype, w.view.row(r), w.deq.data() + r * cols, cols);
  return w;
}

inline std::vector<float> MakeActs(int n_tokens, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(n_tokens * cols);
  for (auto& v : x) v = dist(rng);
  // An outlier per token, as real activations have, stresses per-block scales.
  for (int t = 0; t < n_tokens; ++t) x[t * cols + (t * 37) % cols] *= 20.f;
  return x;
}

}  // namespace specd::kernels
