// `specd quantize --format compressed-tensors`: a BF16/F32 safetensors model
// folder -> the same folder with its targeted Linear weights INT4
// pack-quantized exactly as compressed-tensors 0.20.1 writes them (W4A16,
// symmetric, group 32, bf16 scales; loader/compressed_tensors.h has the
// layout), as llm-compressor's data-free W4A16 recipe does on a bf16 model.
//
// Which weights: compressed-tensors' model-free matching
// (utils/match.py, match_quantizable_tensors) with targets ["Linear"]: every
// tensor "<module>.weight" whose module does not end in "norm" and matches no
// `ignore` entry. An entry is an exact module name or "re:" + a regex matched
// at the start of the module name (Python's re.match; the regex is
// ECMAScript, which agrees with Python's syntax for the usual patterns).
//
// Per weight (out, in), in the library's bf16 arithmetic
// (QuantizeRowQ4_BF16): F32/F16 weights are rounded to bf16 first, as loading
// the model with torch_dtype=bfloat16 does; every other tensor is copied
// byte for byte.
//
// Output: one safetensors file per input file, with the input's file names
// (model.safetensors, or the shards and a rewritten
// model.safetensors.index.json); config.json with the library's
// quantization_config; every other non-weight file of the folder (tokenizer,
// chat template, generation config, custom code) copied.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace specd {

// Routed experts only, as Kimi-K2 ships: attention, dense and shared-expert
// MLPs, the router, embeddings, the LM head, multi-token-prediction extras
// and a vision tower stay in their dtype.
std::vector<std::string> DefaultCompressedTensorsIgnore();

struct CompressedTensorsOptions {
  std::vector<std::string> ignore = DefaultCompressedTensorsIgnore();
  // Threads for the quantization (0: all cores).
  int threads = 0;
};

// The quantization_config object compressed-tensors 0.20.1's
// ModelCompressor.update_config writes for this scheme and `ignore`.
std::string CompressedTensorsQuantizationConfig(const std::vector<std::string>& ignore);

// Reads `model_dir`, writes `out_dir` (created; must not be `model_dir`).
// Errors name the file and tensor: a config that already has a
// quantization_config, a bad ignore regex, a targeted weight that is not a 2-D
// float matrix with in % 32 == 0 or holds NaN/Inf, no weight targeted at all.
// *n_quantized (may be null): how many weights were quantized.
Status WriteCompressedTensorsModel(const std::string& model_dir, const std::string& out_dir,
                                   const CompressedTensorsOptions& options, int* n_quantized);

}  // namespace specd
