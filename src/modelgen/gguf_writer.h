// Writes GGUF v3 files: typed metadata plus tensors of every dtype with a ggml
// type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL,
// IQ4_XS; quantized with QuantizeRow), streamed row by row so a multi-GiB
// model never sits in memory twice.
//
// Names and layout are the caller's: use llama.cpp names ("blk.0.attn_q.weight")
// and, for arch llama, q/k rows already in llama.cpp's permuted order
// (model_writer.h does both).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace specd {

struct GgufVocab;  // loader/checkpoint.h

// llama.cpp's general.file_type (llama_ftype) of a file whose matrices are
// `dtype` (the K-quants as their _S variant: every matrix in that type).
uint32_t GgufFileType(DType dtype);

// Produces row `row` of a tensor as `cols` f32 values into `out`.
// Must be deterministic; may be called from one thread only.
using RowFn = std::function<void(int64_t row, float* out)>;

class GgufWriter {
 public:
  void SetString(const std::string& key, const std::string& value);
  void SetU32(const std::string& key, uint32_t value);
  void SetI32(const std::string& key, int32_t value);
  void SetF32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  void SetF32Array(const std::string& key, const std::vector<float>& values);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& values);

  // `shape` in PyTorch order (outermost first; written reversed, as ggml
  // wants). Rows are shape.back() long; `rows` is called once per row and its
  // output converted to `dtype` (QuantizeRow). InvalidArgument if dtype has
  // no ggml type or a row is not a whole number of its blocks.
  Status AddTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                   RowFn rows);

  // Writes everything to `path` (via path + ".tmp", then rename).
  Status Write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    uint32_t ggml_type;
    std::vector<int64_t> shape;
    RowFn rows;
    size_t nbytes;
  };
  void SetRaw(const std::string& key, uint32_t type, std::string bytes);

  std::vector<std::pair<std::string, std::string>> kv_;  // key -> type tag + value bytes
  std::vector<Tensor> tensors_;
};

// tokenizer.ggml.*: `vocab`'s model, pre, tokens, scores, token types,
// merges, unk/pad ids and add_bos/add_eos/add_space_prefix (null or no
// tokens: model "no_vocab" only), then bos_id (if >= 0) and eos_ids[0..2] as
// the eos / eot / eom ids.
void SetTokenizerKeys(const GgufVocab* vocab, int bos_id, const std::vector<int>& eos_ids,
                      GgufWriter* w);

// Buffered file output with Status errors naming the file; used by both writers.
class FileSink {
 public:
  ~FileSink();
  Status Open(const std::string& path);
  Status Write(const void* data, size_t n);
  Status Pad(size_t alignment);  // zero bytes up to a multiple of `alignment`
  // Flushes, closes and renames the temporary file onto `path`.
  Status Commit();
  size_t offset() const { return offset_; }

 private:
  std::string path_, tmp_path_;
  std::FILE* f_ = nullptr;
  size_t offset_ = 0;
};

}  // namespace specd
