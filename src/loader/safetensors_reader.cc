#include "loader/safetensors_reader.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "loader/compressed_tensors.h"

namespace specd {

namespace {
using json = nlohmann::json;

constexpr std::pair<const char*, DType> kDTypes[] = {
    {"F32", DType::kF32}, {"F16", DType::kF16},   {"BF16", DType::kBF16}, {"I64", DType::kI64},
    {"I32", DType::kI32}, {"I8", DType::kI8},     {"BOOL", DType::kBool},
};

// Largest dimension accepted; keeps numel * 8 far from overflowing.
constexpr int64_t kMaxDim = int64_t{1} << 40;

}  // namespace

StatusOr<DType> SafetensorsDType(const std::string& name, const std::string& tensor,
                                 const std::string& path) {
  for (const auto& [n, t] : kDTypes) {
    if (name == n) return t;
  }
  if (name == "F8_E4M3") {
    return UnsupportedError(
        fmt::format("dtype F8_E4M3 in tensor {} of file {}: {}", tensor, path, kFp8Unsupported));
  }
  return UnsupportedError(fmt::format(
      "unknown dtype {} in tensor {} of file {} (supported: F32, F16, BF16, I64, I32, I8, BOOL)",
      name, tensor, path));
}

const char* SafetensorsDTypeName(DType t) {
  for (const auto& [n, d] : kDTypes) {
    if (d == t) return n;
  }
  return "?";
}

StatusOr<std::vector<TensorView>> ParseSafetensors(const uint8_t* data, size_t size,
                                                   const std::string& path) {
  if (size < 8) {
    return CorruptionError(fmt::format(
        "{}: file is {} bytes, shorter than the 8-byte safetensors header length", path, size));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);
  if (header_len > size - 8) {
    return CorruptionError(fmt::format(
        "{}: header length {} runs past the end of the file ({} bytes after the length field)",
        path, header_len, size - 8));
  }
  const char* hdr = reinterpret_cast<const char*>(data + 8);
  json root = json::parse(hdr, hdr + header_len, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return CorruptionError(fmt::format("{}: the {}-byte header is not valid JSON", path, header_len));
  }
  if (!root.is_object()) {
    return CorruptionError(fmt::format("{}: header: expected a JSON object, found {}", path,
                                       root.type_name()));
  }
  const uint8_t* base = data + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<TensorView> out;
  out.reserve(root.size());
  for (const auto& [name, e] : root.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& what) {
      return CorruptionError(fmt::format("{}: tensor '{}': {}", path, name, what));
    };
    if (!e.is_object()) return bad(fmt::format("expected an object, found {}", e.type_name()));
    if (!e.contains("dtype") || !e["dtype"].is_string()) return bad("missing string 'dtype'");
    if (!e.contains("shape") || !e["shape"].is_array()) return bad("missing array 'shape'");
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2) {
      return bad("missing 'data_offsets' [begin, end]");
    }
    TensorView t;
    t.name = name;
    ASSIGN_OR_RETURN(t.dtype, SafetensorsDType(e["dtype"].get<std::string>(), name, path));
    int64_t numel = 1;
    for (const json& d : e["shape"]) {
      if (!d.is_number_integer()) return bad(fmt::format("shape {}: expected integers", d.dump()));
      int64_t v = d.get<int64_t>();
      if (v < 0 || v > kMaxDim) {
        return bad(fmt::format("shape {}: dimension {} is negative or absurd", e["shape"].dump(), v));
      }
      if (v != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / v) {
        return bad(fmt::format("shape {}: element count overflows", e["shape"].dump()));
      }
      numel *= v;
      t.shape.push_back(v);
    }
    const json& offs = e["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
      // nlohmann stores non-negative literals as unsigned.
      return bad(fmt::format("data_offsets {}: expected two non-negative integers", offs.dump()));
    }
    uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end) {
      return bad(fmt::format("data_offsets [{}, {}]: begin is after end", begin, end));
    }
    if (end > data_size) {
      return bad(fmt::format("data_offsets [{}, {}] run past the end of the data section ({} bytes)",
                             begin, end, data_size));
    }
    const uint64_t expected = static_cast<uint64_t>(numel) * DTypeBlockBytes(t.dtype);
    if (end - begin != expected) {
      return bad(fmt::format("data_offsets [{}, {}] hold {} bytes, but {} x {} needs {} bytes",
                             begin, end, end - begin, e["dtype"].get<std::string>(),
                             ShapeToString(t.shape), expected));
    }
    t.data = base + begin;
    t.nbytes = static_cast<size_t>(expected);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace specd
