// Load-time checks that garbage weights cannot pass silently.
//
// Structural (always): no two tensors' byte ranges overlap, except a tensor
// that aliases another exactly (a tied head sharing the embedding's bytes).
// A dtype rewritten in a header (Q8_0 declared as F32) makes a tensor run
// into its neighbour: Corruption naming both tensors.
//
// Values (--check-tensors, as llama.cpp's): every float a tensor holds must be
// finite. kDefault scans what a NaN/Inf most often hides in and costs least:
// norm weights, token embeddings, and the fp16 block scales (and mins) of the
// ggml block types (a quantized value is finite iff they are). kFull scans
// every element of every float tensor too. kOff scans nothing.
// The check reads raw bits (an exponent of all ones), so it never converts.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tensor/tensor_view.h"

namespace specd {

enum class CheckTensors { kOff, kDefault, kFull };

// "off" | "default" | "full"; InvalidArgument naming the accepted values.
StatusOr<CheckTensors> ParseCheckTensors(std::string_view s);
const char* CheckTensorsName(CheckTensors c);

// Corruption "PATH: tensors A [..) and B [..) overlap" for the first overlap.
// Two names over exactly the same bytes are refused too, unless they are the
// LM head and the embedding of a model whose config ties them
// (`tied_embeddings`): no format stores any other tensor twice.
Status CheckTensorRanges(const std::map<std::string, TensorView>& tensors, const std::string& path,
                         bool tied_embeddings);

// Corruption "PATH: tensor T holds a NaN/Inf at element E (row R)" for the
// first non-finite value found under `mode`. *scanned_bytes (optional) gets
// the bytes read.
Status CheckTensorValues(const std::map<std::string, TensorView>& tensors, CheckTensors mode,
                         const std::string& path, size_t* scanned_bytes = nullptr);

}  // namespace specd
