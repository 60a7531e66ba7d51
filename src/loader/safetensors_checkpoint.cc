// Model folders: config.json + model.safetensors, or shards listed in
// model.safetensors.index.json (or model-0000N-of-0000M.safetensors alone).
//
// After reading the files: with config.tensor_prefix set (Kimi-K2.5's
// "language_model.") only the tensors under it are kept, with the prefix
// stripped, and the checkpoint's config.tensor_prefix becomes empty (its
// names no longer carry it); then compressed-tensors INT4 triples become
// Q4_BF16 tensors (loader/compressed_tensors.h).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/checkpoint_internal.h"
#include "loader/compressed_tensors.h"
#include "loader/safetensors_reader.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Reads the index's weight_map (tensor -> shard file name).
Status ReadIndex(const std::string& index_path, std::map<std::string, std::string>* weight_map) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return CorruptionError(index_path + ": not valid JSON");
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object()) {
    return CorruptionError(index_path + ": missing object 'weight_map'");
  }
  for (const auto& [name, file] : root["weight_map"].items()) {
    if (!file.is_string()) {
      return CorruptionError(fmt::format("{}: weight_map['{}']: expected a file name, found {}",
                                         index_path, name, file.type_name()));
    }
    std::string f = file.get<std::string>();
    // Shards live beside the index: no directories, no way out of the folder.
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return CorruptionError(fmt::format("{}: weight_map['{}']: '{}' is not a file name in the "
                                         "model folder",
                                         index_path, name, f));
    }
    (*weight_map)[name] = f;
  }
  return Status::Ok();
}

// Keeps the tensors named `prefix`..., without the prefix.
Status StripTensorPrefix(const std::string& dir, const std::string& prefix,
                         std::map<std::string, TensorView>* tensors) {
  std::map<std::string, TensorView> kept;
  size_t skipped = 0;
  for (auto& [name, t] : *tensors) {
    if (name.compare(0, prefix.size(), prefix) != 0) {
      ++skipped;
      continue;
    }
    t.name = name.substr(prefix.size());
    kept.emplace(t.name, std::move(t));
  }
  if (kept.empty()) {
    return NotFoundError(fmt::format("{}: config.json's architecture names its tensors '{}*', but "
                                     "no tensor starts with '{}'",
                                     dir, prefix, prefix));
  }
  if (skipped > 0) {
    LOG_INFO("load weights", "{}: skipped {} tensors outside '{}' (vision tower and projector)",
             dir, skipped, prefix);
  }
  *tensors = std::move(kept);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<CheckpointBuilder>> OpenSafetensorsFolder(const ModelSource& source,
                                                                   const LoadOptions& options) {
  const std::string& dir = source.dir;
  auto ck = std::make_unique<CheckpointBuilder>(dir, "safetensors");
  const std::string& config_path = source.config_file;
  ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(config_path));
  ASSIGN_OR_RETURN(ck->mutable_config(), ParseHfConfig(config_text, config_path));
  ASSIGN_OR_RETURN(const WeightQuantization quantization,
                   ParseQuantizationConfig(config_text, config_path));

  // File names relative to the folder (the index names its shards so).
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> files;
  if (source.format == WeightsFormat::kSafetensorsIndex) {
    RETURN_IF_ERROR(ReadIndex(source.index_file, &weight_map));
    std::set<std::string> uniq;
    for (const auto& [name, f] : weight_map) uniq.insert(f);
    files.assign(uniq.begin(), uniq.end());
  } else {
    for (const std::string& f : source.weight_files) files.push_back(fs::path(f).filename().string());
  }
  if (files.empty()) {
    return NotFoundError(fmt::format("{}: no model.safetensors, model.safetensors.index.json or "
                                     "model-*-of-*.safetensors in the folder",
                                     dir));
  }

  MapOptions map_options;
  map_options.use_mmap = options.use_mmap;
  map_options.populate = options.populate;
  std::map<std::string, std::string> tensor_file;  // tensor -> shard it came from
  for (const std::string& name : files) {
    const std::string path = dir + "/" + name;
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mf, MappedFile::Open(path, map_options));
    ASSIGN_OR_RETURN(std::vector<TensorView> views, ParseSafetensors(mf->data(), mf->size(), path));
    ck->AddFile(std::move(mf));
    for (TensorView& v : views) {
      auto [it, inserted] = tensor_file.emplace(v.name, name);
      if (!inserted) {
        return CorruptionError(fmt::format("{}: tensor '{}' appears in both {} and {}", dir, v.name,
                                           it->second, name));
      }
      std::string key = v.name;
      ck->mutable_tensors().emplace(std::move(key), std::move(v));
    }
  }
  for (const auto& [name, f] : weight_map) {
    auto it = tensor_file.find(name);
    if (it == tensor_file.end() || it->second != f) {
      return NotFoundError(fmt::format("{}: tensor '{}' is listed in model.safetensors.index.json "
                                       "for {} but is not in that file",
                                       dir, name, f));
    }
  }
  std::string& prefix = ck->mutable_config().tensor_prefix;
  const std::string file_prefix = prefix;
  if (!prefix.empty()) {
    RETURN_IF_ERROR(StripTensorPrefix(dir, prefix, &ck->mutable_tensors()));
    prefix.clear();
  }
  std::vector<std::vector<uint8_t>> buffers;
  int n_int4 = 0;
  RETURN_IF_ERROR(UnpackInt4Triples(quantization, dir, &ck->mutable_tensors(), &buffers, &n_int4));
  for (std::vector<uint8_t>& b : buffers) ck->AddOwned(std::move(b));
  if (quantization != WeightQuantization::kNone) {
    RETURN_IF_ERROR(CheckQuantizationTargets(config_text, config_path, file_prefix,
                                             ck->tensors()));
  }
  if (n_int4 > 0) {
    LOG_INFO("load weights", "{}: {} compressed-tensors INT4 weights (group {}) as q4_bf16", dir,
             n_int4, kQuantBlock);
  }
  return ck;
}

}  // namespace specd
