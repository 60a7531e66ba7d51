#include "loader/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "base/clock.h"
#include "base/logging.h"
#include "loader/checkpoint_internal.h"
#include "loader/weight_names.h"

namespace specd {

StatusOr<TensorView> Checkpoint::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return NotFoundError(fmt::format("{}: tensor '{}' not found ({} checkpoint with {} tensors)",
                                     path_, name, format_, tensors_.size()));
  }
  return it->second;
}

StatusOr<TensorView> Checkpoint::Get(const std::string& name,
                                     const std::vector<int64_t>& shape) const {
  ASSIGN_OR_RETURN(TensorView t, Get(name));
  if (t.shape != shape) {
    return InvalidArgumentError(fmt::format("tensor {} in {}: expected shape {}, found {}", name,
                                            path_, ShapeToString(shape), ShapeToString(t.shape)));
  }
  return t;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.nbytes;
  return n;
}

namespace {

// The layer index of "model.layers.N.…" or "blk.N.…", else -1.
int LayerOf(const std::string& name) {
  for (const char* prefix : {"model.layers.", "blk."}) {
    const size_t n = std::strlen(prefix);
    if (name.compare(0, n, prefix) != 0) continue;
    size_t i = n;
    int layer = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && layer < (1 << 20)) {
      layer = layer * 10 + (name[i++] - '0');
    }
    if (i > n && i < name.size() && name[i] == '.') return layer;
  }
  return -1;
}

// Tensors in the file that no layer of the config reads. Layers past the
// config's n_layers (+ its MTP layers) mean the config and the file disagree
// (num_hidden_layers / block_count too small): an error naming them. Other
// extras a format allows (a config's MTP layers, rotary inv_freq buffers,
// rope_freqs) are ignored with one warning that counts them.
Status CheckUnreadTensors(const CheckpointBuilder& ck, const std::vector<TensorSpec>& expected) {
  const ModelConfig& c = ck.config();
  std::set<std::string> read;
  for (const TensorSpec& spec : expected) read.insert(spec.name);
  std::vector<std::string> past, mtp, other;
  int max_layer = -1;
  for (const auto& [name, t] : ck.tensors()) {
    // rope_freqs.weight holds llama3 RoPE factors the config already gives
    // (ModelConfig::rope_scaling): expected, not read.
    if (read.count(name) || name == "rope_freqs.weight") continue;
    const int layer = LayerOf(name);
    if (layer >= c.n_layers + c.n_mtp_layers) {
      past.push_back(name);
      max_layer = std::max(max_layer, layer);
    } else if (layer >= c.n_layers) {
      mtp.push_back(name);
    } else {
      other.push_back(name);
    }
  }
  const char* key = ck.format() == "gguf" ? "block_count" : "num_hidden_layers";
  if (!past.empty()) {
    return CorruptionError(fmt::format(
        "{}: {} tensors belong to layers {}..{}, but the config has {} = {}{} (e.g. '{}'): the "
        "config and the weights disagree",
        ck.path(), past.size(), c.n_layers + c.n_mtp_layers, max_layer, key,
        c.n_layers + c.n_mtp_layers,
        c.n_mtp_layers ? fmt::format(" with {} MTP layers", c.n_mtp_layers) : "", past.front()));
  }
  if (!mtp.empty() || !other.empty()) {
    std::vector<std::string> some(other.begin(), other.begin() + std::min<size_t>(3, other.size()));
    LOG_WARN("load weights", "{}: {} tensors no layer of the config reads were ignored ({} in "
             "the config's {} MTP layers{}{})",
             ck.path(), mtp.size() + other.size(), mtp.size(), c.n_mtp_layers,
             other.empty() ? "" : fmt::format("; {} others, e.g. ", other.size()),
             fmt::format("{}", fmt::join(some, ", ")));
  }
  return Status::Ok();
}

// Aliases a tied LM head and checks that every tensor the architecture needs
// is present with the shape the config implies, so a bad checkpoint fails at
// load with the tensor's name, not later inside the forward pass.
Status Finish(CheckpointBuilder& ck) {
  const ModelConfig& c = ck.config();
  auto& tensors = ck.mutable_tensors();
  if (c.tie_embeddings && !ck.Has("lm_head.weight") && ck.Has("model.embed_tokens.weight")) {
    TensorView head = tensors.at("model.embed_tokens.weight");
    head.name = "lm_head.weight";
    tensors.emplace("lm_head.weight", std::move(head));
  }
  if (c.arch == "llama_eagle3") return Status::Ok();
  ModelConfig untied = c;
  untied.tie_embeddings = false;  // lm_head must exist either way (maybe aliased)
  const char* from = ck.format() == "gguf" ? "GGUF metadata" : "config.json";
  for (const TensorSpec& spec : ExpectedTensors(untied)) {
    auto it = tensors.find(spec.name);
    if (it == tensors.end()) {
      std::string hint = ck.format() == "gguf" ? " ('" + HfToGgufName(spec.name) + "' in the file)" : "";
      return NotFoundError(fmt::format("{}: missing tensor '{}'{} (expected shape {} for {})",
                                       ck.path(), spec.name, hint, ShapeToString(spec.shape), c.arch));
    }
    const TensorView& t = it->second;
    if (t.shape != spec.shape) {
      return CorruptionError(fmt::format("{}: tensor '{}': expected shape {} (from {}), found {}",
                                         ck.path(), spec.name, ShapeToString(spec.shape), from,
                                         ShapeToString(t.shape)));
    }
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16 &&
        !IsQuantized(t.dtype)) {
      return UnsupportedError(fmt::format("{}: tensor '{}': dtype {} cannot be a weight",
                                          ck.path(), spec.name, DTypeName(t.dtype)));
    }
  }
  return CheckUnreadTensors(ck, ExpectedTensors(untied));
}

}  // namespace

Status QuantizeOnLoad(CheckpointBuilder& ck, DType dtype) {
  if (dtype != DType::kQ8_0 && dtype != DType::kQ4_0) {
    return InvalidArgumentError(fmt::format("--quantize: expected q8_0 or q4_0, got {}",
                                            DTypeName(dtype)));
  }
  // A tied LM head aliases the embedding: quantize the bytes once.
  std::map<const void*, TensorView> done;
  int n_quantized = 0, n_kept = 0;
  std::vector<float> row;
  for (auto& [name, t] : ck.mutable_tensors()) {
    if (t.shape.size() != 2) continue;
    if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16) continue;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    if (cols % kQuantBlock != 0) {
      ++n_kept;
      continue;
    }
    auto it = done.find(t.data);
    if (it == done.end()) {
      const size_t row_bytes = RowBytes(dtype, cols);
      std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
      row.resize(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(t.dtype, t.row(r), row.data(), cols);
        QuantizeRow(dtype, row.data(), bytes.data() + static_cast<size_t>(r) * row_bytes, cols);
      }
      TensorView q = t;
      q.dtype = dtype;
      q.data = bytes.data();
      q.nbytes = bytes.size();
      ck.AddOwned(std::move(bytes));
      it = done.emplace(t.data, q).first;
      ++n_quantized;
    }
    const std::string keep_name = t.name;
    t = it->second;
    t.name = keep_name;
  }
  LOG_INFO("load weights", "quantized {} matrices to {} at load{}", n_quantized, DTypeName(dtype),
           n_kept ? fmt::format(" ({} kept: rows not a multiple of {})", n_kept, kQuantBlock) : "");
  return Status::Ok();
}

uint8_t* CheckpointBuilder::WritableBytes(const TensorView& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (std::vector<uint8_t>& o : owned_) {
    if (p >= o.data() && p + t.nbytes <= o.data() + o.size()) return o.data() + (p - o.data());
  }
  for (const auto& f : files_) {
    // Anonymous memory mapped PROT_READ | PROT_WRITE (base/mapped_file.cc).
    if (!f->is_mmap() && p >= f->data() && p + t.nbytes <= f->data() + f->size()) {
      return const_cast<uint8_t*>(p);
    }
  }
  return nullptr;
}

void RepackOnLoad(CheckpointBuilder& ck, const LoadOptions& options) {
  if (!options.repack_for_matmul) return;
  auto& tensors = ck.mutable_tensors();
  const auto embed = tensors.find("model.embed_tokens.weight");
  const void* embed_data = embed == tensors.end() ? nullptr : embed->second.data;
  auto is_matmul_weight = [](const std::string& name) {
    return name == "lm_head.weight" || name == "fc.weight" ||
           (name.size() > 12 && name.compare(name.size() - 12, 12, "_proj.weight") == 0);
  };
  int n = 0, mapped = 0;
  Stopwatch sw;
  for (auto& [name, t] : tensors) {
    // kv_b_proj's rows are split per head at load (mla_moe_model.cc).
    if (!is_matmul_weight(name) || t.data == embed_data ||
        name.find("kv_b_proj") != std::string::npos) {
      continue;
    }
    uint8_t* bytes = ck.WritableBytes(t);
    if (bytes == nullptr) {
      mapped += options.repack_for_matmul(&t, nullptr) ? 1 : 0;
      continue;
    }
    if (options.repack_for_matmul(&t, bytes)) ++n;
  }
  if (n > 0 || mapped > 0) {
    const std::string left =
        mapped ? fmt::format(" ({} mmap-ed matrices left in the file's layout)", mapped) : "";
    LOG_INFO("load weights", "repacked {} matrices for the matmul kernels in {:.2f} s{}", n,
             sw.Seconds(), left);
  }
}

StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpoint(const std::string& path,
                                                     const LoadOptions& options) {
  ASSIGN_OR_RETURN(ModelSource source, ResolveModelSource(path));
  return OpenCheckpoint(source, options);
}

StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpoint(const ModelSource& source,
                                                     const LoadOptions& options) {
  Stopwatch sw;
  const std::string& path = source.is_gguf() ? source.weight_files[0] : source.path;
  std::unique_ptr<CheckpointBuilder> ck;
  if (source.format == WeightsFormat::kNone) {
    return NotFoundError(fmt::format("{}: no weights (a tokenizer-only source)", source.path));
  }
  if (source.is_gguf()) {
    ASSIGN_OR_RETURN(ck, OpenGgufFile(path, options));
  } else {
    ASSIGN_OR_RETURN(ck, OpenSafetensorsFolder(source, options));
  }
  RETURN_IF_ERROR(Finish(*ck));
  {
    Stopwatch check;
    RETURN_IF_ERROR(CheckTensorRanges(ck->tensors(), path, ck->config().tie_embeddings));
    size_t scanned = 0;
    RETURN_IF_ERROR(CheckTensorValues(ck->tensors(), options.check_tensors, path, &scanned));
    if (options.check_tensors != CheckTensors::kOff) {
      LOG_INFO("load weights", "checked tensors ({}): {:.1f} MiB scanned for NaN/Inf in {:.3f} s",
               CheckTensorsName(options.check_tensors), static_cast<double>(scanned) / (1 << 20),
               check.Seconds());
    }
  }
  if (options.quantize) RETURN_IF_ERROR(QuantizeOnLoad(*ck, *options.quantize));
  RepackOnLoad(*ck, options);
  // Bytes actually held: a tied head aliases the embedding and is counted once.
  std::set<const void*> seen;
  size_t held = 0;
  for (const auto& [name, t] : ck->tensors()) {
    if (seen.insert(t.data).second) held += t.nbytes;
  }
  LOG_INFO("load weights", "loaded {} tensors, {:.1f} MiB in {:.2f} s from {} ({}, {})",
           ck->tensors().size(), static_cast<double>(held) / (1 << 20), sw.Seconds(),
           path, ck->format(), options.use_mmap ? "mmap" : "read");
  return std::unique_ptr<Checkpoint>(std::move(ck));
}

}  // namespace specd
