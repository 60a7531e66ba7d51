#include "loader/tensor_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <cstring>
#include <vector>

#include "tensor/dtype.h"

namespace specd {
namespace {

bool Fp16NonFinite(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }
bool Bf16NonFinite(uint16_t b) { return (b & 0x7F80u) == 0x7F80u; }
bool Fp32NonFinite(uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u; }

// Index of the first non-finite element of `n` elements of a float dtype, or
// -1.
int64_t FirstNonFinite(DType dtype, const uint8_t* p, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, p + 4 * i, 4);
        if (Fp32NonFinite(u)) return i;
      }
      return -1;
    case DType::kF16:
    case DType::kBF16: {
      const bool f16 = dtype == DType::kF16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        if (f16 ? Fp16NonFinite(h) : Bf16NonFinite(h)) return i;
      }
      return -1;
    }
    default: return -1;
  }
}

// Index of the first block with a non-finite fp16 scale or min, or -1.
int64_t FirstBadScale(DType dtype, const uint8_t* p, int64_t blocks) {
  const size_t stride = DTypeBlockBytes(dtype);
  int offsets[2];
  const int n_halves = BlockHalfOffsets(dtype, offsets);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int i = 0; i < n_halves; ++i) {
      uint16_t d;
      std::memcpy(&d, p + static_cast<size_t>(b) * stride + offsets[i], 2);
      if (Fp16NonFinite(d)) return b;
    }
  }
  return -1;
}

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }
// Block types with fp16 scales (every ggml type; not Q4_BF16).
bool HasHalfScales(DType d) {
  int offsets[2];
  return BlockHalfOffsets(d, offsets) > 0;
}

// Norm weights and token embeddings: where a NaN poisons every token.
bool DefaultScanned(const std::string& name) {
  return name.find("norm") != std::string::npos || name.find("embed_tokens") != std::string::npos ||
         name.find("embedding") != std::string::npos;
}

}  // namespace

StatusOr<CheckTensors> ParseCheckTensors(std::string_view s) {
  if (s == "off") return CheckTensors::kOff;
  if (s == "default") return CheckTensors::kDefault;
  if (s == "full") return CheckTensors::kFull;
  return InvalidArgumentError(
      fmt::format("--check-tensors: expected off, default or full, got '{}'", s));
}

const char* CheckTensorsName(CheckTensors c) {
  switch (c) {
    case CheckTensors::kOff: return "off";
    case CheckTensors::kDefault: return "default";
    case CheckTensors::kFull: return "full";
  }
  return "?";
}

Status CheckTensorRanges(const std::map<std::string, TensorView>& tensors, const std::string& path,
                         bool tied_embeddings) {
  std::vector<const TensorView*> v;
  v.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (t.nbytes > 0) v.push_back(&t);
  }
  auto begin = [](const TensorView* t) { return reinterpret_cast<uintptr_t>(t->data); };
  std::sort(v.begin(), v.end(), [&](const TensorView* a, const TensorView* b) {
    return begin(a) != begin(b) ? begin(a) < begin(b) : a->nbytes < b->nbytes;
  });
  // The furthest end seen so far and who owns it.
  const TensorView* reach = nullptr;
  for (const TensorView* t : v) {
    if (reach != nullptr) {
      const bool alias = begin(t) == begin(reach) && t->nbytes == reach->nbytes;
      if (alias) {
        const std::set<std::string> pair = {reach->name, t->name};
        const bool tied = tied_embeddings &&
                          pair == std::set<std::string>{"lm_head.weight", "model.embed_tokens.weight"};
        if (!tied) {
          return CorruptionError(fmt::format(
              "{}: tensors '{}' and '{}' ({} {}, {} bytes) share the same bytes in the file: the "
              "format stores every tensor once (only an LM head tied to the embedding by the "
              "config may alias it)",
              path, reach->name, t->name, DTypeName(t->dtype), ShapeToString(t->shape),
              t->nbytes));
        }
      }
      if (!alias && begin(t) < begin(reach) + reach->nbytes) {
        return CorruptionError(fmt::format(
            "{}: tensors '{}' ({} {}, {} bytes) and '{}' ({} {}, {} bytes) overlap in the file: a "
            "header declares a type or shape larger than the data written for it",
            path, reach->name, DTypeName(reach->dtype), ShapeToString(reach->shape), reach->nbytes,
            t->name, DTypeName(t->dtype), ShapeToString(t->shape), t->nbytes));
      }
    }
    if (reach == nullptr || begin(t) + t->nbytes > begin(reach) + reach->nbytes) reach = t;
  }
  return Status::Ok();
}

Status CheckTensorValues(const std::map<std::string, TensorView>& tensors, CheckTensors mode,
                         const std::string& path, size_t* scanned_bytes) {
  size_t scanned = 0;
  if (scanned_bytes != nullptr) *scanned_bytes = 0;
  if (mode == CheckTensors::kOff) return Status::Ok();
  std::vector<const void*> seen;  // an aliased tensor is scanned once
  for (const auto& [name, t] : tensors) {
    if (std::find(seen.begin(), seen.end(), t.data) != seen.end()) continue;
    seen.push_back(t.data);
    const auto* p = static_cast<const uint8_t*>(t.data);
    int64_t bad = -1;
    std::string where;
    if (IsFloat(t.dtype) && (mode == CheckTensors::kFull || DefaultScanned(name))) {
      bad = FirstNonFinite(t.dtype, p, t.numel());
      scanned += t.nbytes;
      if (bad >= 0) {
        where = fmt::format("element {} (row {}, column {})", bad, bad / std::max<int64_t>(1, t.cols()),
                            bad % std::max<int64_t>(1, t.cols()));
      }
    } else if (HasHalfScales(t.dtype)) {
      // The block scales are always read (cheap: 2 or 4 bytes in 18 to 210).
      const int64_t block = DTypeBlockElems(t.dtype);
      const int64_t blocks = t.numel() / block;
      bad = FirstBadScale(t.dtype, p, blocks);
      int offsets[2];
      scanned += static_cast<size_t>(blocks) * 2 * BlockHalfOffsets(t.dtype, offsets);
      if (bad >= 0) {
        const int64_t per_row = std::max<int64_t>(1, t.cols() / block);
        where = fmt::format("the scale of block {} (row {}, elements {}..{})", bad, bad / per_row,
                            (bad % per_row) * block, (bad % per_row) * block + block - 1);
      }
    }
    if (bad >= 0) {
      if (scanned_bytes != nullptr) *scanned_bytes = scanned;
      return CorruptionError(fmt::format(
          "{}: tensor '{}' ({} {}) holds a NaN or Inf at {}: the weights are damaged (a failed "
          "conversion or training run); re-download or re-convert them, or pass --check-tensors off "
          "to load them anyway",
          path, name, DTypeName(t.dtype), ShapeToString(t.shape), where));
    }
  }
  if (scanned_bytes != nullptr) *scanned_bytes = scanned;
  return Status::Ok();
}

}  // namespace specd
