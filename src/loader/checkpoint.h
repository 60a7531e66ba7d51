// A loaded checkpoint: its ModelConfig plus named tensors that point into
// mmap-ed (or --no-mmap: anonymous) file memory.
//
// Tensor names are Hugging Face names for every format
// ("model.embed_tokens.weight", "model.layers.3.self_attn.q_proj.weight",
// "model.norm.weight", "lm_head.weight"): the GGUF reader maps llama.cpp names
// ("token_embd.weight", "blk.3.attn_q.weight", ...) onto them. Shapes are
// PyTorch order (out, in).
//
// Invariants: every TensorView's bytes lie inside its file (checked at open,
// so later reads can never go out of bounds); nbytes == rows * row_bytes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "loader/model_config.h"
#include "loader/model_source.h"
#include "loader/tensor_check.h"
#include "tensor/tensor_view.h"

namespace specd {

struct LoadOptions {
  bool use_mmap = true;  // false: read into anonymous memory (--no-mmap)
  bool populate = false; // MAP_POPULATE when mmap-ing
  // Q8_0 or Q4_0: quantize every float matrix (2-D, rows a multiple of 32
  // elements) at load, row by row with the same quantizer `specd quantize`
  // uses, so the weights are bit-identical to that GGUF's. The quantized
  // copies live in anonymous memory owned by the checkpoint.
  std::optional<DType> quantize;
  // NaN/Inf scan of the file's values (loader/tensor_check.h); the byte
  // ranges are always checked for overlap.
  CheckTensors check_tensors = CheckTensors::kDefault;
  // Rearranges a matmul weight's bytes in place into the layout its kernels
  // read fastest and sets its TensorView::layout, or returns false and leaves
  // it (kernels::RepackForMatMul); with null bytes (mmap-ed, read-only) it
  // only says whether it would have. Null function: no repacking. Applied after
  // `quantize` to the linear layers' weights ("*_proj.weight") and an untied
  // "lm_head.weight" held in anonymous memory: not to mmap-ed bytes, nor to
  // a tied head, whose rows the embedding lookup reads.
  std::function<bool(TensorView*, uint8_t*)> repack_for_matmul;
};

// Tokenizer data found inside a GGUF file (tokenizer.ggml.*); empty for
// safetensors (their tokenizer.json sits next to them).
// Defaults when a key is absent follow llama.cpp: for model "llama" (SPM)
// bos/eos/unk = 1/2/0, add_bos = true, add_space_prefix = true; for other
// models ids stay -1, add_bos = false and add_space_prefix = false.
// scores / token_types are empty when absent, else as long as tokens.
struct GgufVocab {
  std::string model;             // "llama" (SPM), "gpt2" (BPE), "no_vocab", ""
  std::string pre;               // tokenizer.ggml.pre ("llama-bpe", "qwen2", "default", ...)
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte
  std::vector<std::string> merges;   // "a b"
  int bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;
};

class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  const ModelConfig& config() const { return config_; }
  // Folder or file the checkpoint came from.
  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "safetensors" | "gguf"

  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  // NotFound naming the tensor and the file(s) searched.
  StatusOr<TensorView> Get(const std::string& name) const;
  // Also checks the shape: "tensor X in F: expected shape [a, b], found [c, d]".
  StatusOr<TensorView> Get(const std::string& name, const std::vector<int64_t>& shape) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Sum of all tensor bytes (what a decode step reads, roughly).
  size_t total_bytes() const;

  const GgufVocab& gguf_vocab() const { return vocab_; }

 protected:
  ModelConfig config_;
  std::string path_;
  std::string format_;
  std::map<std::string, TensorView> tensors_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::vector<uint8_t>> owned_;  // quantize-on-load copies
  GgufVocab vocab_;
};

// Opens the weights of a resolved model source (loader/model_source.h): a
// model folder (config.json + model.safetensors, or sharded
// model-0000N-of-0000M.safetensors with model.safetensors.index.json), a
// .gguf file, or a folder holding one .gguf. Errors name the file, the
// tensor or key, expected vs found.
StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpoint(const ModelSource& source,
                                                     const LoadOptions& options = {});
// ResolveModelSource(path), then the above.
StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpoint(const std::string& path,
                                                     const LoadOptions& options = {});

// Reads only the tokenizer.ggml.* metadata of a GGUF file: works for
// vocab-only files (zero tensors, no model keys) and for full models (tensor
// infos are not parsed). Errors name the file and the key.
StatusOr<GgufVocab> ReadGgufVocab(const std::string& path);

}  // namespace specd
