// Whole-model writers shared by `specd make-model` and `specd quantize`:
// a ModelConfig plus HF-named weights -> a GGUF file or a safetensors folder.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "loader/checkpoint.h"
#include "loader/model_config.h"
#include "modelgen/gguf_writer.h"

namespace specd {

// One weight in HF layout: q/k rows in rotate_half order, shape (out, in).
struct WeightSource {
  std::string name;             // HF name
  std::vector<int64_t> shape;   // PyTorch order
  RowFn rows;                   // f32 row r of the HF-layout tensor
};

// The Llama-family weights of `ck` (ExpectedTensors order) as HF-layout rows:
// for checkpoints with RopeStyle::kInterleaved (GGUF llama) the q/k
// permutation is undone. A tied LM head is left out. The rows read `ck`'s
// memory, so `ck` must outlive the result.
StatusOr<std::vector<WeightSource>> WeightsFromCheckpoint(const Checkpoint& ck);

// config.json text for `c` (HF keys, so ParseHfConfig reads back the same
// ModelConfig: RopeStyle::kHalf for the Llama family). DeepSeek-V2/V3 configs
// carry what transformers' DeepseekV2Config / DeepseekV3Config read (q_lora_rank
// null for a plain q_proj, rope_scaling with "type" and "rope_type" yarn,
// rope_interleave, num_nextn_predict_layers 0); tensor_prefix
// "language_model." writes Kimi-K2.5's KimiK25ForConditionalGeneration with
// the model under text_config. `dtype` fills torch_dtype.
StatusOr<std::string> HfConfigJson(const ModelConfig& c, DType dtype);

struct GgufModelOptions {
  DType dtype = DType::kF16;          // for matrices; 1-D norms and biases stay F32
  // Per-matrix dtypes that replace `dtype` (Hugging Face names, e.g.
  // "model.layers.0.mlp.down_proj.weight"), as llama.cpp's mixes keep some
  // matrices in a wider type.
  std::map<std::string, DType> tensor_dtypes;
  const GgufVocab* vocab = nullptr;   // tokenizer.ggml.* to embed; null: "no_vocab"
  std::string name = "specd model";   // general.name
};

// Writes llama.cpp's layout: arch "llama" for llama/mistral (q/k rows
// permuted for interleaved RoPE exactly as convert_hf_to_gguf.py does),
// "qwen2"/"qwen3" unpermuted; llama3 RoPE scaling as rope_freqs.weight.
// Matrices whose rows are not a whole number of blocks of their quantized
// dtype fall back to f16 (logged). Unsupported for llama_eagle3; MLA (DeepSeek-V2/V3) models go
// to WriteDeepseek2Gguf (modelgen/gguf_deepseek2_writer.h).
Status WriteGgufModel(const ModelConfig& c, const std::vector<WeightSource>& weights,
                      const GgufModelOptions& options, const std::string& path);

// Writes `dir`/model.safetensors and `dir`/config.json (creating `dir`).
// dtype: f32, f16 or bf16 for every tensor (norms included, as HF checkpoints
// do) except StoredDType's exceptions.
Status WriteSafetensorsModel(const ModelConfig& c, const std::vector<WeightSource>& weights,
                             DType dtype, const std::string& dir);

// The dtype WriteSafetensorsModel stores tensor `name` in when asked for
// `dtype`: MoE routers' e_score_correction_bias stays f32 (as DeepSeek-V3 and
// Kimi-K2 checkpoints store it); everything else `dtype`.
DType StoredDType(const std::string& name, DType dtype);

// Inverse of GgufRowToHfRow: the GGUF row holding HF row `hf_row`.
int64_t HfRowToGgufRow(int64_t hf_row, int64_t rows, int n_head);

}  // namespace specd
