// A fixture with a known defect: one element of one tensor of a safetensors
// model overwritten in place, for tests of the checks that must catch it
// (a NaN the load-time scan does not cover, the run-time logits check).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace specd {

// Sets element `index` (row-major) of tensor `tensor` in
// `model_dir`/model.safetensors to `value`, converted to the tensor's dtype
// (F32, BF16 or F16). NotFound: no such file or tensor; OutOfRange: index
// past the tensor's elements; Unsupported: another dtype.
Status PlantValue(const std::string& model_dir, const std::string& tensor, int64_t index,
                  float value);

}  // namespace specd
