// GGUF v2/v3 parsing (llama.cpp's single-file format; see docs/formats.md).
//
// ParseGguf reads the header, every metadata key/value and (optionally) every
// tensor info from an in-memory image of the file. Every read is bounds-checked
// and every count is checked against the bytes left, so a truncated or lying
// file yields a Status naming the file, the key or tensor, expected vs found,
// and never an out-of-bounds read. After a successful parse every tensor's
// bytes lie inside [data, data + size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace specd {

// gguf_type: the type tag of a metadata value.
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* GgufTypeName(GgufType t);

// ggml_type values this project reads or writes.
enum GgmlType : uint32_t {
  kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6, kGgmlQ5_1 = 7,
  kGgmlQ8_0 = 8, kGgmlQ2_K = 10, kGgmlQ3_K = 11, kGgmlQ4_K = 12, kGgmlQ5_K = 13,
  kGgmlQ6_K = 14, kGgmlIQ4_NL = 20, kGgmlIQ4_XS = 23, kGgmlBF16 = 30,
};
// ggml's name for a tensor type ("Q4_K", "IQ2_XS", ...); "type N" if unknown.
std::string GgmlTypeName(uint32_t type);
// The tensor types specd reads, for messages: "F32, F16, BF16, Q8_0, ...".
const char* SupportedGgmlTypes();
// The dtype of every type above, else Unsupported.
StatusOr<DType> DTypeFromGgml(uint32_t type);
// Inverse for writing; false when t has no ggml type (q4_bf16, integers).
bool GgmlFromDType(DType t, uint32_t* type);

// One metadata value. Scalars fill exactly one of i/u/f/b/s; arrays fill
// elem_type and either strs (string arrays) or nums (numeric and bool arrays;
// integers up to 2^53 are exact). Nested arrays are skipped (count kept).
struct GgufValue {
  GgufType type = GgufType::kU8;
  int64_t i = 0;   // signed integers
  uint64_t u = 0;  // unsigned integers
  double f = 0;    // f32 / f64
  bool b = false;
  std::string s;
  GgufType elem_type = GgufType::kU8;
  uint64_t count = 0;
  std::vector<std::string> strs;
  std::vector<double> nums;
};

struct GgufTensorInfo {
  std::string name;              // as in the file ("blk.0.attn_q.weight")
  std::vector<int64_t> ne;       // ggml order: innermost first
  uint32_t ggml_type = 0;
  DType dtype = DType::kF32;
  uint64_t offset = 0;           // relative to the data section
  size_t nbytes = 0;
};

struct GgufFile {
  std::string path;
  uint32_t version = 0;
  std::map<std::string, GgufValue> kv;
  std::vector<GgufTensorInfo> tensors;
  size_t alignment = 32;
  size_t data_offset = 0;        // absolute file offset of the data section

  bool Has(const std::string& key) const { return kv.count(key) != 0; }
  // Typed getters: NotFound naming the key and file when absent; InvalidArgument
  // naming key, expected and found type when the type does not fit (integers
  // accept any integer type whose value fits; floats also accept integers).
  StatusOr<int64_t> GetInt(const std::string& key) const;
  StatusOr<double> GetFloat(const std::string& key) const;
  StatusOr<std::string> GetString(const std::string& key) const;
  StatusOr<bool> GetBool(const std::string& key) const;
  StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  StatusOr<std::vector<double>> GetNumArray(const std::string& key) const;
};

// REQUIRES: data points to `size` readable bytes (the whole file).
// with_tensors=false stops after the metadata (vocab-only reads).
StatusOr<GgufFile> ParseGguf(const uint8_t* data, size_t size, const std::string& path,
                             bool with_tensors);

}  // namespace specd

namespace specd {

struct GgufVocab;  // loader/checkpoint.h
// Fills a GgufVocab from tokenizer.ggml.* keys. Missing keys keep the
// defaults documented at GgufVocab; wrong types, array lengths that disagree
// with the token list and special ids outside it are errors naming the key.
Status VocabFromGguf(const GgufFile& f, GgufVocab* vocab);

}  // namespace specd
