// Construction access to Checkpoint for the format readers (not a public API).
#pragma once

#include <memory>
#include <string>

#include "loader/checkpoint.h"

namespace specd {

class CheckpointBuilder : public Checkpoint {
 public:
  CheckpointBuilder(std::string path, std::string format) {
    path_ = std::move(path);
    format_ = std::move(format);
  }
  ModelConfig& mutable_config() { return config_; }
  std::map<std::string, TensorView>& mutable_tensors() { return tensors_; }
  GgufVocab& mutable_vocab() { return vocab_; }
  // Keeps the file mapped for as long as the checkpoint lives.
  const MappedFile* AddFile(std::unique_ptr<MappedFile> f) {
    files_.push_back(std::move(f));
    return files_.back().get();
  }
  // Keeps a buffer (quantize-on-load) alive for as long as the checkpoint.
  void AddOwned(std::vector<uint8_t> bytes) { owned_.push_back(std::move(bytes)); }
  // The writable bytes of `t` when the checkpoint owns them in anonymous
  // memory (a --no-mmap file or a quantize-on-load copy); null when mmap-ed.
  uint8_t* WritableBytes(const TensorView& t);
};

// Format readers used by OpenCheckpoint: a resolved safetensors folder
// (source.format kSafetensors*); `gguf_path` the .gguf file.
StatusOr<std::unique_ptr<CheckpointBuilder>> OpenSafetensorsFolder(const ModelSource& source,
                                                                   const LoadOptions& options);
StatusOr<std::unique_ptr<CheckpointBuilder>> OpenGgufFile(const std::string& gguf_path,
                                                          const LoadOptions& options);

// Replaces every float matrix whose rows are whole 32-element blocks by a
// Q8_0/Q4_0 copy (LoadOptions::quantize).
Status QuantizeOnLoad(CheckpointBuilder& ck, DType dtype);

// Applies LoadOptions::repack_for_matmul to the linear layers' weights
// (*_proj.weight, an EAGLE-3 head's fc.weight) and an untied LM head that the
// checkpoint holds in writable memory.
void RepackOnLoad(CheckpointBuilder& ck, const LoadOptions& options);

}  // namespace specd
