// Writes safetensors files (F32/F16/BF16 from f32 rows, or raw bytes of any
// safetensors dtype such as EAGLE-3's I64 d2t / BOOL t2d).
//
// Layout matches what the reference implementation writes: tensors sorted
// by element size (largest first) then name, contiguous with no gaps, and
// the JSON header padded with spaces to a multiple of 8 so every F32 tensor
// stays 4-byte aligned.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "modelgen/gguf_writer.h"  // RowFn, FileSink
#include "tensor/dtype.h"

namespace specd {

class SafetensorsWriter {
 public:
  // `shape` PyTorch order; rows are shape.back() long (a 0-d/1-d tensor is one
  // row). InvalidArgument for quantized dtypes.
  Status AddTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                   RowFn rows);
  // Copies `bytes` as the tensor's data. REQUIRES: bytes outlive Write().
  Status AddRawTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                      const void* bytes, size_t nbytes);
  void SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  Status Write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    RowFn rows;               // or
    const void* raw = nullptr;
    size_t nbytes = 0;
  };
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace specd
