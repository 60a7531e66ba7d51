// safetensors parsing (see docs/formats.md):
//   u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {...}}, then the data section; offsets are relative to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/tensor_view.h"

namespace specd {

// "F32", "F16", "BF16", "I64", "I32", "I8", "BOOL" -> DType; else Unsupported
// "unknown dtype X in tensor Y of file F" (F8_E4M3: the FP8 checkpoint hint of
// loader/compressed_tensors.h).
StatusOr<DType> SafetensorsDType(const std::string& name, const std::string& tensor,
                                 const std::string& path);
// Inverse, for writers. REQUIRES: t is not quantized.
const char* SafetensorsDTypeName(DType t);

// Parses the header of a safetensors image and returns views into `data` for
// every tensor, in header order. Checks everything before returning: header
// length vs file size, JSON shape, dtype, shape (non-negative, no overflow),
// data_offsets (begin <= end <= data section size, end - begin == bytes of
// dtype x shape). Overlapping ranges are allowed. "__metadata__" is skipped.
// REQUIRES: data points to `size` readable bytes.
StatusOr<std::vector<TensorView>> ParseSafetensors(const uint8_t* data, size_t size,
                                                   const std::string& path);

}  // namespace specd
