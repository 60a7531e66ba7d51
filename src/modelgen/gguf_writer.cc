#include "modelgen/gguf_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "loader/checkpoint.h"
#include "loader/gguf_reader.h"
#include "tensor/tensor_view.h"

namespace specd {

// ---- FileSink ----

FileSink::~FileSink() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_path_.c_str());
  }
}

Status FileSink::Open(const std::string& path) {
  path_ = path;
  tmp_path_ = path + ".tmp";
  f_ = std::fopen(tmp_path_.c_str(), "wb");
  if (f_ == nullptr) return ErrnoError(tmp_path_ + ": cannot open for writing", errno);
  std::setvbuf(f_, nullptr, _IOFBF, size_t{1} << 20);
  return Status::Ok();
}

Status FileSink::Write(const void* data, size_t n) {
  if (n == 0) return Status::Ok();
  if (std::fwrite(data, 1, n, f_) != n) {
    return ErrnoError(fmt::format("{}: write of {} bytes at offset {} failed", tmp_path_, n, offset_),
                      errno);
  }
  offset_ += n;
  return Status::Ok();
}

Status FileSink::Pad(size_t alignment) {
  static const char kZeros[64] = {};
  size_t pad = (alignment - offset_ % alignment) % alignment;
  while (pad > 0) {
    size_t n = std::min(pad, sizeof(kZeros));
    RETURN_IF_ERROR(Write(kZeros, n));
    pad -= n;
  }
  return Status::Ok();
}

Status FileSink::Commit() {
  std::FILE* f = f_;
  f_ = nullptr;
  if (std::fflush(f) != 0) {
    int err = errno;
    std::fclose(f);
    std::remove(tmp_path_.c_str());
    return ErrnoError(tmp_path_ + ": flush failed", err);
  }
  if (std::fclose(f) != 0) {
    int err = errno;
    std::remove(tmp_path_.c_str());
    return ErrnoError(tmp_path_ + ": close failed", err);
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    std::remove(tmp_path_.c_str());
    return ErrnoError(fmt::format("cannot rename {} to {}", tmp_path_, path_), err);
  }
  return Status::Ok();
}

// ---- GgufWriter ----

namespace {

constexpr size_t kAlignment = 32;  // GGUF default; general.alignment is not written

template <typename T>
void Append(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void AppendString(std::string* s, const std::string& v) {
  Append<uint64_t>(s, v.size());
  s->append(v);
}

}  // namespace

void GgufWriter::SetRaw(const std::string& key, uint32_t type, std::string bytes) {
  std::string enc;
  Append<uint32_t>(&enc, type);
  enc += bytes;
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(enc);
      return;
    }
  }
  kv_.emplace_back(key, std::move(enc));
}

void GgufWriter::SetString(const std::string& key, const std::string& value) {
  std::string b;
  AppendString(&b, value);
  SetRaw(key, static_cast<uint32_t>(GgufType::kString), std::move(b));
}
void GgufWriter::SetU32(const std::string& key, uint32_t value) {
  std::string b;
  Append(&b, value);
  SetRaw(key, static_cast<uint32_t>(GgufType::kU32), std::move(b));
}
void GgufWriter::SetI32(const std::string& key, int32_t value) {
  std::string b;
  Append(&b, value);
  SetRaw(key, static_cast<uint32_t>(GgufType::kI32), std::move(b));
}
void GgufWriter::SetF32(const std::string& key, float value) {
  std::string b;
  Append(&b, value);
  SetRaw(key, static_cast<uint32_t>(GgufType::kF32), std::move(b));
}
void GgufWriter::SetBool(const std::string& key, bool value) {
  std::string b;
  Append<uint8_t>(&b, value ? 1 : 0);
  SetRaw(key, static_cast<uint32_t>(GgufType::kBool), std::move(b));
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  std::string b;
  Append<uint32_t>(&b, static_cast<uint32_t>(GgufType::kString));
  Append<uint64_t>(&b, values.size());
  for (const std::string& v : values) AppendString(&b, v);
  SetRaw(key, static_cast<uint32_t>(GgufType::kArray), std::move(b));
}
void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& values) {
  std::string b;
  Append<uint32_t>(&b, static_cast<uint32_t>(GgufType::kF32));
  Append<uint64_t>(&b, values.size());
  for (float v : values) Append(&b, v);
  SetRaw(key, static_cast<uint32_t>(GgufType::kArray), std::move(b));
}
void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& values) {
  std::string b;
  Append<uint32_t>(&b, static_cast<uint32_t>(GgufType::kI32));
  Append<uint64_t>(&b, values.size());
  for (int32_t v : values) Append(&b, v);
  SetRaw(key, static_cast<uint32_t>(GgufType::kArray), std::move(b));
}

uint32_t GgufFileType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 11;
    case DType::kQ4_K: return 14;
    case DType::kQ5_K: return 16;
    case DType::kQ6_K: return 18;
    case DType::kIQ4_NL: return 25;
    case DType::kIQ4_XS: return 30;
    default: return 32;  // BF16
  }
}

Status GgufWriter::AddTensor(const std::string& name, DType dtype,
                             const std::vector<int64_t>& shape, RowFn rows) {
  uint32_t ggml_type;
  if (!GgmlFromDType(dtype, &ggml_type)) {
    return InvalidArgumentError(fmt::format("GGUF tensor '{}': dtype {} cannot be written "
                                            "(supported: {})",
                                            name, DTypeName(dtype), SupportedGgmlTypes()));
  }
  if (shape.empty() || shape.size() > 4) {
    return InvalidArgumentError(fmt::format("GGUF tensor '{}': shape {} must have 1 to 4 dims",
                                            name, ShapeToString(shape)));
  }
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int64_t cols = shape.back();
  if (cols % DTypeBlockElems(dtype) != 0) {
    return InvalidArgumentError(fmt::format("GGUF tensor '{}': row length {} is not a multiple of "
                                            "the {} block size {}",
                                            name, cols, DTypeName(dtype), DTypeBlockElems(dtype)));
  }
  size_t nbytes = RowBytes(dtype, cols) * static_cast<size_t>(cols ? numel / cols : 0);
  tensors_.push_back({name, dtype, ggml_type, shape, std::move(rows), nbytes});
  return Status::Ok();
}

Status GgufWriter::Write(const std::string& path) const {
  FileSink out;
  RETURN_IF_ERROR(out.Open(path));
  std::string head = "GGUF";
  Append<uint32_t>(&head, 3);
  Append<uint64_t>(&head, tensors_.size());
  Append<uint64_t>(&head, kv_.size());
  for (const auto& [key, enc] : kv_) {
    AppendString(&head, key);
    head += enc;
  }
  size_t offset = 0;
  for (const Tensor& t : tensors_) {
    AppendString(&head, t.name);
    Append<uint32_t>(&head, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) Append<int64_t>(&head, *it);
    Append<uint32_t>(&head, t.ggml_type);
    Append<uint64_t>(&head, offset);
    offset += (t.nbytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  RETURN_IF_ERROR(out.Write(head.data(), head.size()));
  RETURN_IF_ERROR(out.Pad(kAlignment));
  std::vector<float> row;
  std::vector<uint8_t> buf;
  for (const Tensor& t : tensors_) {
    const int64_t cols = t.shape.back();
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const int64_t n_rows = cols ? numel / cols : 0;
    row.resize(static_cast<size_t>(cols));
    buf.resize(RowBytes(t.dtype, cols));
    for (int64_t r = 0; r < n_rows; ++r) {
      t.rows(r, row.data());
      QuantizeRow(t.dtype, row.data(), buf.data(), cols);
      RETURN_IF_ERROR(out.Write(buf.data(), buf.size()));
    }
    RETURN_IF_ERROR(out.Pad(kAlignment));
  }
  return out.Commit();
}

void SetTokenizerKeys(const GgufVocab* vocab, int bos_id, const std::vector<int>& eos_ids,
                      GgufWriter* w) {
  if (vocab != nullptr && !vocab->tokens.empty()) {
    const GgufVocab& v = *vocab;
    w->SetString("tokenizer.ggml.model", v.model);
    if (!v.pre.empty()) w->SetString("tokenizer.ggml.pre", v.pre);
    w->SetStringArray("tokenizer.ggml.tokens", v.tokens);
    if (!v.scores.empty()) w->SetF32Array("tokenizer.ggml.scores", v.scores);
    if (!v.token_types.empty()) w->SetI32Array("tokenizer.ggml.token_type", v.token_types);
    if (!v.merges.empty()) w->SetStringArray("tokenizer.ggml.merges", v.merges);
    if (v.unk_id >= 0) w->SetU32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id));
    if (v.pad_id >= 0) w->SetU32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
    w->SetBool("tokenizer.ggml.add_bos_token", v.add_bos);
    w->SetBool("tokenizer.ggml.add_eos_token", v.add_eos);
    w->SetBool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  } else {
    w->SetString("tokenizer.ggml.model", "no_vocab");
  }
  if (bos_id >= 0) w->SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos_id));
  const char* const kEosKeys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                   "tokenizer.ggml.eom_token_id"};
  for (size_t i = 0; i < eos_ids.size() && i < 3; ++i) {
    w->SetU32(kEosKeys[i], static_cast<uint32_t>(eos_ids[i]));
  }
}

}  // namespace specd
