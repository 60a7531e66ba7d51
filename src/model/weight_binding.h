// Binding a rank's slice of checkpoint tensors into the forward pass's types:
// zero-copy row ranges where possible, column slices copied on quantization
// block boundaries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "loader/checkpoint.h"
#include "tensor/tensor_view.h"

namespace specd {

// One linear layer's local shard: y = x·Wᵀ + b.
struct Linear {
  TensorView w;                 // (out_local, in_local), points into the checkpoint or `owned`
  std::vector<uint8_t> owned;   // column slice copy for row-parallel layers
  std::vector<float> bias;      // (out_local) or empty
};

// Reads elements [begin, begin + len) of the 1-D float tensor `name` of `n`
// elements (any float dtype) as f32.
Status ReadVector(const Checkpoint& ck, const std::string& name, int64_t n, int64_t begin,
                  int64_t len, std::vector<float>* out);

// Binds rows [row_begin, row_begin + row_len) and columns [col_begin,
// col_begin + col_len) of the (out_full, in_full) weight `name`, and the
// matching part of "<name minus weight>bias" when the checkpoint has one.
// Columns must lie on the dtype's block boundaries.
Status BindLinear(const Checkpoint& ck, const std::string& name, int64_t out_full, int64_t in_full,
                  int64_t row_begin, int64_t row_len, int64_t col_begin, int64_t col_len,
                  Linear* lin);

// "model.layers.<l>.<suffix>"
std::string LayerName(int l, const char* suffix);

}  // namespace specd
