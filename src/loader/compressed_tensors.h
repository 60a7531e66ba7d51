// compressed-tensors checkpoints (config.json "quantization_config" with
// quant_method "compressed-tensors", as llm-compressor writes them and
// Kimi-K2 ships its routed experts): which quantization the loader accepts,
// and how a pack-quantized INT4 weight becomes one Q4_BF16 tensor.
//
// Accepted: format "pack-quantized" and every config group's weights
//   {num_bits 4, type "int", symmetric true, strategy "group", group_size 32,
//    dynamic false, actorder null/absent}, no input/output activation
//   quantization (W4A16). The library's optional fields (observer,
//   observer_kwargs, block_structure null, scale_dtype null/bfloat16) are
//   ignored. Anything else is Unsupported, naming the field, the value and
//   what is supported.
//
// On disk, a quantized Linear X has three tensors instead of X.weight
// (compressed-tensors 0.20.1, compressors/pack_quantized):
//   X.weight_packed  I32 (out, in / 8): element j of a row is bits
//                    4(j % 8) .. 4(j % 8) + 3 of word j / 8, holding q + 8
//                    (q in [-8, 7]); words little-endian.
//   X.weight_scale   (out, in / 32): BF16 (F16 or F32 only when every value
//                    is exact in bf16).
//   X.weight_shape   I32 or I64 (2): [out, in].
// w[r, j] = scale[r, j / 32] * q[r, j]. The loader re-orders each group's
// nibbles into BlockQ4_BF16 (element i in the low nibble of qs[i], i + 16 in
// the high one; tensor/dtype.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/tensor_view.h"

namespace specd {

enum class WeightQuantization {
  kNone,                // no quantization_config: dense weights only
  kPackQuantizedInt4,   // compressed-tensors W4A16, group 32, symmetric
};

// Reads config.json's quantization_config (top level, else inside
// text_config, as Kimi-K2.5 nests its text model). `source` names the file.
// quant_method "fp8" (DeepSeek-V3's block-quantized release) is Unsupported
// with a pointer to the BF16 conversion; unknown methods are Unsupported.
StatusOr<WeightQuantization> ParseQuantizationConfig(const std::string& config_json,
                                                     const std::string& source);

// The Unsupported message for FP8 block-quantized checkpoints (config or
// F8_E4M3 tensors).
extern const char kFp8Unsupported[];

// Replaces every X.weight_packed / X.weight_scale / X.weight_shape triple in
// `tensors` by X.weight (Q4_BF16, shape [out, in]) whose bytes are a new
// buffer appended to `buffers` (owned by the caller for as long as the views
// live). With kNone, a packed triple is an error (the config does not say how
// to read it). Errors name `source`, the tensor, what was expected and found:
// a missing member of the triple, X.weight beside it, an asymmetric
// X.weight_zero_point, a weight_shape that is not 2 positive integers, in not
// a multiple of 32, a packed or scale shape or dtype that disagrees with
// weight_shape, a scale not exact in bf16. Nothing is read past a tensor's
// bytes. *n_converted (may be null) counts the triples.
// After UnpackInt4Triples: the config's `ignore` names no module stored as
// INT4, and every config group's `targets` match at least one (module names
// carry `tensor_prefix`, the file's, e.g. "language_model."). Errors name the
// field, the pattern and the module.
Status CheckQuantizationTargets(const std::string& config_json, const std::string& source,
                                const std::string& tensor_prefix,
                                const std::map<std::string, TensorView>& tensors);

Status UnpackInt4Triples(WeightQuantization quantization, const std::string& source,
                         std::map<std::string, TensorView>* tensors,
                         std::vector<std::vector<uint8_t>>* buffers, int* n_converted);

// One pack-quantized row (in / 8 int32 words) -> in / 32 BlockQ4_BF16 with
// the given bf16 scales. REQUIRES: in % 32 == 0.
void RepackInt4Row(const uint8_t* packed, const uint16_t* scales_bf16, int64_t in,
                   uint8_t* blocks);

}  // namespace specd
