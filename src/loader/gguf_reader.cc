#include "loader/gguf_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace specd {
namespace {

constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;       // nested arrays deeper than this are refused

// Bounds-checked little-endian reader over the file image. Every failed read
// names the file, what was being read and the offset.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  Status Truncated(std::string_view what, size_t need) const {
    return CorruptionError(fmt::format(
        "{}: truncated GGUF file while reading {}: need {} bytes at offset {}, file has {} bytes",
        path_, what, need, pos_, size_));
  }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    if (left() < sizeof(T)) return Truncated(what, sizeof(T));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* out, std::string_view what) {
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, what));
    if (len > left()) {
      return CorruptionError(fmt::format(
          "{}: {}: string length {} at offset {} runs past the end of the file ({} bytes left)",
          path_, what, len, pos_ - 8, left()));
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }

  Status Skip(size_t n, std::string_view what) {
    if (left() < n) return Truncated(what, n);
    pos_ += n;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Bytes of one scalar of type t; 0 for string/array (variable size).
size_t ScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    default: return 0;
  }
}

bool IsValidType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }
bool IsIntType(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kI8 || t == GgufType::kU16 ||
         t == GgufType::kI16 || t == GgufType::kU32 || t == GgufType::kI32 ||
         t == GgufType::kU64 || t == GgufType::kI64;
}
bool IsUnsigned(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64;
}

// Reads one scalar (not string/array) of type t into v.
Status ReadScalar(Cursor& c, GgufType t, GgufValue* v, std::string_view what) {
  switch (t) {
    case GgufType::kU8: { uint8_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->i = x; break; }
    case GgufType::kI8: { int8_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; break; }
    case GgufType::kU16: { uint16_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->i = x; break; }
    case GgufType::kI16: { int16_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; break; }
    case GgufType::kU32: { uint32_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->u = x; v->i = x; break; }
    case GgufType::kI32: { int32_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; break; }
    case GgufType::kU64: {
      uint64_t x{};
      RETURN_IF_ERROR(c.Read(&x, what));
      v->u = x;
      v->i = x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(x);
      break;
    }
    case GgufType::kI64: { int64_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->i = x; break; }
    case GgufType::kF32: { float x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->f = x; break; }
    case GgufType::kF64: { double x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->f = x; break; }
    case GgufType::kBool: { uint8_t x{}; RETURN_IF_ERROR(c.Read(&x, what)); v->b = x != 0; break; }
    default: return InternalError("ReadScalar on a non-scalar type");
  }
  return Status::Ok();
}

double ScalarAsDouble(GgufType t, const GgufValue& v) {
  if (t == GgufType::kF32 || t == GgufType::kF64) return v.f;
  if (t == GgufType::kBool) return v.b ? 1 : 0;
  if (IsUnsigned(t)) return static_cast<double>(v.u);
  return static_cast<double>(v.i);
}

Status ReadValue(Cursor& c, GgufType t, GgufValue* v, const std::string& key,
                 const std::string& path, int depth);

Status ReadArray(Cursor& c, GgufValue* v, const std::string& key, const std::string& path,
                 int depth) {
  uint32_t et = 0;
  RETURN_IF_ERROR(c.Read(&et, "array element type of key '" + key + "'"));
  if (!IsValidType(et)) {
    return CorruptionError(fmt::format("{}: key '{}': unknown array element type {} (expected 0..12)",
                                       path, key, et));
  }
  uint64_t n = 0;
  RETURN_IF_ERROR(c.Read(&n, "array length of key '" + key + "'"));
  GgufType elem = static_cast<GgufType>(et);
  // Each element takes at least this many bytes, so a count the file cannot
  // hold is rejected before anything is allocated.
  size_t min_elem = ScalarBytes(elem);
  if (elem == GgufType::kString) min_elem = 8;
  if (elem == GgufType::kArray) min_elem = 12;
  if (n > c.left() / min_elem) {
    return CorruptionError(fmt::format(
        "{}: key '{}': array of {} {} elements needs at least {} bytes, only {} bytes left in the file",
        path, key, n, GgufTypeName(elem), static_cast<double>(n) * min_elem, c.left()));
  }
  v->elem_type = elem;
  v->count = n;
  if (elem == GgufType::kString) {
    v->strs.resize(static_cast<size_t>(n));
    for (uint64_t k = 0; k < n; ++k) {
      RETURN_IF_ERROR(c.ReadString(&v->strs[k], fmt::format("element {} of key '{}'", k, key)));
    }
  } else if (elem == GgufType::kArray) {
    if (depth >= kMaxArrayDepth) {
      return CorruptionError(fmt::format("{}: key '{}': arrays nested deeper than {}", path, key,
                                         kMaxArrayDepth));
    }
    for (uint64_t k = 0; k < n; ++k) {
      GgufValue inner;
      RETURN_IF_ERROR(ReadValue(c, GgufType::kArray, &inner, key, path, depth + 1));
    }
  } else {
    v->nums.resize(static_cast<size_t>(n));
    GgufValue tmp;
    for (uint64_t k = 0; k < n; ++k) {
      RETURN_IF_ERROR(ReadScalar(c, elem, &tmp, "element of key '" + key + "'"));
      v->nums[k] = ScalarAsDouble(elem, tmp);
    }
  }
  return Status::Ok();
}

Status ReadValue(Cursor& c, GgufType t, GgufValue* v, const std::string& key,
                 const std::string& path, int depth) {
  v->type = t;
  if (t == GgufType::kString) return c.ReadString(&v->s, "value of key '" + key + "'");
  if (t == GgufType::kArray) return ReadArray(c, v, key, path, depth);
  return ReadScalar(c, t, v, "value of key '" + key + "'");
}

size_t AlignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

const char* GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "uint8";
    case GgufType::kI8: return "int8";
    case GgufType::kU16: return "uint16";
    case GgufType::kI16: return "int16";
    case GgufType::kU32: return "uint32";
    case GgufType::kI32: return "int32";
    case GgufType::kF32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "uint64";
    case GgufType::kI64: return "int64";
    case GgufType::kF64: return "float64";
  }
  return "?";
}

std::string GgmlTypeName(uint32_t type) {
  static const char* const kNames[] = {
      "F32",     "F16",     "Q4_0",     "Q4_1",     "Q4_2",     "Q4_3",       "Q5_0",
      "Q5_1",    "Q8_0",    "Q8_1",     "Q2_K",     "Q3_K",     "Q4_K",       "Q5_K",
      "Q6_K",    "Q8_K",    "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS",  "IQ1_S",      "IQ4_NL",
      "IQ3_S",   "IQ2_S",   "IQ4_XS",   "I8",       "I16",      "I32",        "I64",
      "F64",     "IQ1_M",   "BF16",     "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8",   "TQ1_0",
      "TQ2_0",   "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (type < sizeof(kNames) / sizeof(kNames[0])) return kNames[type];
  return "type " + std::to_string(type);
}

namespace {

struct GgmlDType {
  uint32_t ggml;
  DType dtype;
};
constexpr GgmlDType kGgmlDTypes[] = {
    {kGgmlF32, DType::kF32},       {kGgmlF16, DType::kF16},       {kGgmlBF16, DType::kBF16},
    {kGgmlQ8_0, DType::kQ8_0},     {kGgmlQ4_0, DType::kQ4_0},     {kGgmlQ4_1, DType::kQ4_1},
    {kGgmlQ5_0, DType::kQ5_0},     {kGgmlQ5_1, DType::kQ5_1},     {kGgmlQ2_K, DType::kQ2_K},
    {kGgmlQ3_K, DType::kQ3_K},     {kGgmlQ4_K, DType::kQ4_K},     {kGgmlQ5_K, DType::kQ5_K},
    {kGgmlQ6_K, DType::kQ6_K},     {kGgmlIQ4_NL, DType::kIQ4_NL}, {kGgmlIQ4_XS, DType::kIQ4_XS},
};

}  // namespace

const char* SupportedGgmlTypes() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
         "IQ4_XS";
}

StatusOr<DType> DTypeFromGgml(uint32_t type) {
  for (const GgmlDType& m : kGgmlDTypes) {
    if (m.ggml == type) return m.dtype;
  }
  return UnsupportedError("unsupported tensor type " + GgmlTypeName(type) + " (supported: " +
                          SupportedGgmlTypes() + ")");
}

bool GgmlFromDType(DType t, uint32_t* type) {
  for (const GgmlDType& m : kGgmlDTypes) {
    if (m.dtype == t) {
      *type = m.ggml;
      return true;
    }
  }
  return false;
}

namespace {

// Every byte of the data section belongs to a tensor info, up to the padding
// to `alignment` after each tensor, and the bytes between the infos and the
// data section are zero padding. A header whose tensor_count is smaller than
// the infos written fails both (the unread info sits where padding should be,
// and the last tensor's data belongs to no info); without the checks every
// tensor would be read at a shifted offset.
Status CheckDataSection(const GgufFile& f, const uint8_t* data, size_t size, size_t infos_end,
                        size_t data_size) {
  if (f.tensors.empty()) return Status::Ok();
  for (size_t i = infos_end; i < f.data_offset && i < size; ++i) {
    if (data[i] != 0) {
      return CorruptionError(fmt::format(
          "{}: byte {} between the tensor infos (end at {}) and the data section (at {}) is not "
          "zero padding: the header's tensor_count ({}) may be smaller than the tensor infos "
          "written",
          f.path, i, infos_end, f.data_offset, f.tensors.size()));
    }
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& ti : f.tensors) by_offset.push_back(&ti);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  size_t end = 0;  // end of the data accounted for so far
  const GgufTensorInfo* prev = nullptr;
  for (const GgufTensorInfo* ti : by_offset) {
    if (ti->offset > AlignUp(end, f.alignment)) {
      return CorruptionError(fmt::format(
          "{}: data section bytes [{}, {}) belong to no tensor (between '{}' and '{}'): the "
          "tensor infos do not describe the data written",
          f.path, end, ti->offset, prev ? prev->name : "the start", ti->name));
    }
    end = std::max(end, static_cast<size_t>(ti->offset) + ti->nbytes);
    prev = ti;
  }
  if (data_size > AlignUp(end, f.alignment)) {
    return CorruptionError(fmt::format(
        "{}: {} bytes after the last tensor's data ('{}', ends at {} of the data section) belong "
        "to no tensor: the header's tensor_count ({}) may be smaller than the tensors written, "
        "or the file has trailing bytes",
        f.path, data_size - end, prev->name, end, f.tensors.size()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GgufFile> ParseGguf(const uint8_t* data, size_t size, const std::string& path,
                             bool with_tensors) {
  GgufFile f;
  f.path = path;
  Cursor c(data, size, path);
  char magic[4] = {};
  if (size < 4) return c.Truncated("the magic \"GGUF\"", 4);
  std::memcpy(magic, data, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return CorruptionError(fmt::format("{}: not a GGUF file: expected magic \"GGUF\", found {:02x} {:02x} {:02x} {:02x}",
                                       path, static_cast<uint8_t>(magic[0]),
                                       static_cast<uint8_t>(magic[1]),
                                       static_cast<uint8_t>(magic[2]),
                                       static_cast<uint8_t>(magic[3])));
  }
  RETURN_IF_ERROR(c.Skip(4, "magic"));
  RETURN_IF_ERROR(c.Read(&f.version, "version"));
  if (f.version != 2 && f.version != 3) {
    std::string why = (f.version & 0xffff) == 0 ? " (a big-endian file?)" : "";
    return UnsupportedError(fmt::format("{}: GGUF version {} is not supported (expected 2 or 3){}",
                                        path, f.version, why));
  }
  uint64_t n_tensors = 0, n_kv = 0;
  RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes, a tensor
  // info at least 8 + 4 + 4 + 8.
  if (n_kv > c.left() / 13) {
    return CorruptionError(fmt::format("{}: metadata count {} is impossible for a file of {} bytes",
                                       path, n_kv, size));
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    RETURN_IF_ERROR(c.ReadString(&key, fmt::format("key of metadata entry {}", k)));
    uint32_t t = 0;
    RETURN_IF_ERROR(c.Read(&t, "value type of key '" + key + "'"));
    if (!IsValidType(t)) {
      return CorruptionError(fmt::format("{}: key '{}': unknown value type {} (expected 0..12)",
                                         path, key, t));
    }
    GgufValue v;
    RETURN_IF_ERROR(ReadValue(c, static_cast<GgufType>(t), &v, key, path, 0));
    if (!f.kv.emplace(key, std::move(v)).second) {
      return CorruptionError(fmt::format("{}: duplicate metadata key '{}'", path, key));
    }
  }
  if (auto it = f.kv.find("general.alignment"); it != f.kv.end()) {
    const GgufValue& v = it->second;
    if (v.type != GgufType::kU32) {
      return CorruptionError(fmt::format("{}: key 'general.alignment': expected uint32, found {}",
                                         path, GgufTypeName(v.type)));
    }
    if (v.u == 0 || (v.u & (v.u - 1)) != 0) {
      return CorruptionError(fmt::format(
          "{}: key 'general.alignment': expected a power of two, found {}", path, v.u));
    }
    f.alignment = static_cast<size_t>(v.u);
  }
  if (!with_tensors) return f;

  if (n_tensors > c.left() / 24) {
    return CorruptionError(fmt::format("{}: tensor count {} is impossible for a file of {} bytes",
                                       path, n_tensors, size));
  }
  f.tensors.resize(static_cast<size_t>(n_tensors));
  std::map<std::string, size_t> seen;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo& ti = f.tensors[k];
    RETURN_IF_ERROR(c.ReadString(&ti.name, fmt::format("name of tensor {}", k)));
    const std::string what = "tensor '" + ti.name + "'";
    if (!seen.emplace(ti.name, k).second) {
      return CorruptionError(fmt::format("{}: duplicate tensor name '{}'", path, ti.name));
    }
    uint32_t n_dims = 0;
    RETURN_IF_ERROR(c.Read(&n_dims, "n_dims of " + what));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return CorruptionError(fmt::format("{}: {}: n_dims is {}, expected 1..{}", path, what,
                                         n_dims, kMaxDims));
    }
    ti.ne.resize(n_dims);
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      RETURN_IF_ERROR(c.Read(&ti.ne[d], "dimensions of " + what));
      if (ti.ne[d] < 0) {
        return CorruptionError(fmt::format("{}: {}: dimension {} is negative ({})", path, what,
                                           d, ti.ne[d]));
      }
      if (ti.ne[d] != 0 && numel > std::numeric_limits<int64_t>::max() / ti.ne[d]) {
        return CorruptionError(fmt::format("{}: {}: element count overflows (shape ne = {})",
                                           path, what, fmt::join(ti.ne, ", ")));
      }
      numel *= ti.ne[d];
    }
    RETURN_IF_ERROR(c.Read(&ti.ggml_type, "type of " + what));
    auto dt = DTypeFromGgml(ti.ggml_type);
    if (!dt.ok()) {
      return UnsupportedError(fmt::format("{}: unsupported tensor type {} in tensor {} (supported: {})",
                                          path, GgmlTypeName(ti.ggml_type), ti.name,
                                          SupportedGgmlTypes()));
    }
    ti.dtype = *dt;
    RETURN_IF_ERROR(c.Read(&ti.offset, "data offset of " + what));
    int blk = DTypeBlockElems(ti.dtype);
    if (ti.ne[0] % blk != 0) {
      return CorruptionError(fmt::format(
          "{}: {}: row length {} is not a multiple of the {} block size {}", path, what,
          ti.ne[0], GgmlTypeName(ti.ggml_type), blk));
    }
    // numel * block bytes / block elems cannot overflow: numel <= 2^63 and
    // the byte count is checked against the file size below.
    ti.nbytes = static_cast<size_t>(numel / blk) * DTypeBlockBytes(ti.dtype);
    if (ti.nbytes / DTypeBlockBytes(ti.dtype) != static_cast<size_t>(numel / blk)) {
      return CorruptionError(fmt::format("{}: {}: byte size overflows", path, what));
    }
  }
  f.data_offset = AlignUp(c.pos(), f.alignment);
  if (f.data_offset > size && n_tensors > 0) {
    return CorruptionError(fmt::format(
        "{}: truncated GGUF file: the data section starts at offset {} but the file has {} bytes",
        path, f.data_offset, size));
  }
  const size_t data_size = size >= f.data_offset ? size - f.data_offset : 0;
  for (const GgufTensorInfo& ti : f.tensors) {
    if (ti.offset % f.alignment != 0) {
      return CorruptionError(fmt::format(
          "{}: tensor '{}': data offset {} is not a multiple of the alignment {}", path, ti.name,
          ti.offset, f.alignment));
    }
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset) {
      return CorruptionError(fmt::format(
          "{}: tensor '{}': data [{}, {}) of the data section runs past its end ({} bytes; "
          "file truncated or offset wrong)",
          path, ti.name, ti.offset, static_cast<double>(ti.offset) + static_cast<double>(ti.nbytes),
          data_size));
    }
  }
  RETURN_IF_ERROR(CheckDataSection(f, data, size, c.pos(), data_size));
  return f;
}

// ---- typed getters ----

namespace {
const GgufValue* Find(const GgufFile& f, const std::string& key) {
  auto it = f.kv.find(key);
  return it == f.kv.end() ? nullptr : &it->second;
}
Status Missing(const GgufFile& f, const std::string& key) {
  return NotFoundError(f.path + ": missing metadata key '" + key + "'");
}
Status WrongType(const GgufFile& f, const std::string& key, std::string_view expected,
                 const GgufValue& v) {
  std::string found = GgufTypeName(v.type);
  if (v.type == GgufType::kArray) found = std::string("array of ") + GgufTypeName(v.elem_type);
  return InvalidArgumentError(fmt::format("{}: key '{}': expected {}, found {}", f.path, key,
                                          expected, found));
}
}  // namespace

StatusOr<int64_t> GgufFile::GetInt(const std::string& key) const {
  const GgufValue* v = Find(*this, key);
  if (!v) return Missing(*this, key);
  if (!IsIntType(v->type)) return WrongType(*this, key, "an integer", *v);
  if (v->type == GgufType::kU64 &&
      v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError(fmt::format("{}: key '{}': value {} is too large", path, key, v->u));
  }
  return v->i;
}

StatusOr<double> GgufFile::GetFloat(const std::string& key) const {
  const GgufValue* v = Find(*this, key);
  if (!v) return Missing(*this, key);
  if (v->type == GgufType::kF32 || v->type == GgufType::kF64) return v->f;
  if (IsIntType(v->type)) return ScalarAsDouble(v->type, *v);
  return WrongType(*this, key, "a number", *v);
}

StatusOr<std::string> GgufFile::GetString(const std::string& key) const {
  const GgufValue* v = Find(*this, key);
  if (!v) return Missing(*this, key);
  if (v->type != GgufType::kString) return WrongType(*this, key, "string", *v);
  return v->s;
}

StatusOr<bool> GgufFile::GetBool(const std::string& key) const {
  const GgufValue* v = Find(*this, key);
  if (!v) return Missing(*this, key);
  if (v->type != GgufType::kBool) return WrongType(*this, key, "bool", *v);
  return v->b;
}

StatusOr<std::vector<std::string>> GgufFile::GetStringArray(const std::string& key) const {
  const GgufValue* v = Find(*this, key);
  if (!v) return Missing(*this, key);
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString) {
    return WrongType(*this, key, "array of string", *v);
  }
  return v->strs;
}

StatusOr<std::vector<double>> GgufFile::GetNumArray(const std::string& key) const {
  const GgufValue* v = Find(*this, key);
  if (!v) return Missing(*this, key);
  if (v->type != GgufType::kArray || v->elem_type == GgufType::kString ||
      v->elem_type == GgufType::kArray) {
    return WrongType(*this, key, "array of numbers", *v);
  }
  return v->nums;
}

}  // namespace specd
