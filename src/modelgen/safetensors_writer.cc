#include "modelgen/safetensors_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "loader/safetensors_reader.h"
#include "tensor/tensor_view.h"

namespace specd {
namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Status SafetensorsWriter::AddTensor(const std::string& name, DType dtype,
                                    const std::vector<int64_t>& shape, RowFn rows) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return InvalidArgumentError(fmt::format("safetensors tensor '{}': dtype {} cannot be written "
                                            "from float rows (supported: f32, f16, bf16)",
                                            name, DTypeName(dtype)));
  }
  Tensor t{name, dtype, shape, std::move(rows)};
  t.nbytes = static_cast<size_t>(Numel(shape)) * DTypeBlockBytes(dtype);
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

Status SafetensorsWriter::AddRawTensor(const std::string& name, DType dtype,
                                       const std::vector<int64_t>& shape, const void* bytes,
                                       size_t nbytes) {
  if (IsQuantized(dtype)) {
    return InvalidArgumentError(fmt::format("safetensors tensor '{}': dtype {} does not exist in "
                                            "safetensors (quantized types need GGUF)",
                                            name, DTypeName(dtype)));
  }
  size_t expected = static_cast<size_t>(Numel(shape)) * DTypeBlockBytes(dtype);
  if (nbytes != expected) {
    return InvalidArgumentError(fmt::format("safetensors tensor '{}': {} x {} needs {} bytes, got {}",
                                            name, DTypeName(dtype), ShapeToString(shape), expected,
                                            nbytes));
  }
  Tensor t{name, dtype, shape, nullptr};
  t.raw = bytes;
  t.nbytes = nbytes;
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

Status SafetensorsWriter::Write(const std::string& path) const {
  std::vector<const Tensor*> order;
  for (const Tensor& t : tensors_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
    size_t ea = DTypeBlockBytes(a->dtype), eb = DTypeBlockBytes(b->dtype);
    if (ea != eb) return ea > eb;
    return a->name < b->name;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
    header["__metadata__"] = meta;
  }
  size_t offset = 0;
  for (const Tensor* t : order) {
    header[t->name] = {{"dtype", SafetensorsDTypeName(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->nbytes}}};
    offset += t->nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  FileSink out;
  RETURN_IF_ERROR(out.Open(path));
  uint64_t len = text.size();
  RETURN_IF_ERROR(out.Write(&len, 8));
  RETURN_IF_ERROR(out.Write(text.data(), text.size()));
  std::vector<float> row;
  std::vector<uint8_t> buf;
  for (const Tensor* t : order) {
    if (t->raw != nullptr) {
      RETURN_IF_ERROR(out.Write(t->raw, t->nbytes));
      continue;
    }
    const int64_t cols = t->shape.empty() ? 1 : t->shape.back();
    const int64_t n_rows = cols ? Numel(t->shape) / cols : 0;
    row.resize(static_cast<size_t>(cols));
    buf.resize(RowBytes(t->dtype, cols));
    for (int64_t r = 0; r < n_rows; ++r) {
      t->rows(r, row.data());
      QuantizeRow(t->dtype, row.data(), buf.data(), cols);
      RETURN_IF_ERROR(out.Write(buf.data(), buf.size()));
    }
  }
  return out.Commit();
}

}  // namespace specd
