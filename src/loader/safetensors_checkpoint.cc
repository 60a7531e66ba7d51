// Model folders: config.json + model.safetensors, or shards listed in
// model.safetensors.index.json (or model-0000N-of-0000M.safetensors alone).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/mapped_file.h"
#include "loader/checkpoint_internal.h"
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

}  // namespace

StatusOr<std::unique_ptr<CheckpointBuilder>> OpenSafetensorsFolder(const ModelSource& source,
                                                                   const LoadOptions& options) {
  const std::string& dir = source.dir;
  auto ck = std::make_unique<CheckpointBuilder>(dir, "safetensors");
  const std::string& config_path = source.config_file;
  ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(config_path));
  ASSIGN_OR_RETURN(ck->mutable_config(), ParseHfConfig(config_text, config_path));

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
  return ck;
}

}  // namespace specd
