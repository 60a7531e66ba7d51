#include "modelgen/compressed_tensors_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/model_source.h"
#include "loader/safetensors_reader.h"
#include "modelgen/safetensors_writer.h"
#include "tensor/dtype.h"

namespace specd {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The library version whose output this writer reproduces (the config's
// "version" field, as ModelCompressor.update_config writes it).
constexpr char kLibraryVersion[] = "0.20.1";

// compressed-tensors' ignore list: exact module names and "re:" regexes
// matched at the start of the name (re.match).
class IgnoreList {
 public:
  static StatusOr<IgnoreList> Create(const std::vector<std::string>& entries) {
    IgnoreList list;
    for (const std::string& e : entries) {
      if (e.rfind("re:", 0) != 0) {
        list.exact_.insert(e);
        continue;
      }
      try {
        list.regexes_.emplace_back(e.substr(3), std::regex::ECMAScript);
      } catch (const std::regex_error& err) {
        return InvalidArgumentError(
            fmt::format("ignore pattern '{}': not a valid regular expression ({})", e, err.what()));
      }
    }
    return list;
  }
  bool Matches(const std::string& module) const {
    if (exact_.count(module)) return true;
    for (const std::regex& re : regexes_) {
      if (std::regex_search(module, re, std::regex_constants::match_continuous)) return true;
    }
    return false;
  }

 private:
  std::set<std::string> exact_;
  std::vector<std::regex> regexes_;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// match_quantizable_tensors with targets ["Linear"] and param "weight".
bool IsTargeted(const std::string& tensor, const IgnoreList& ignore) {
  const size_t dot = tensor.rfind('.');
  const std::string module = dot == std::string::npos ? "" : tensor.substr(0, dot);
  const std::string param = dot == std::string::npos ? tensor : tensor.substr(dot + 1);
  return param == "weight" && !EndsWith(module, "norm") && !ignore.Matches(module);
}

// One quantized weight's three tensors (their storage outlives the writer).
struct Packed {
  std::vector<int32_t> packed;  // (out, in / 8)
  std::vector<uint16_t> scale;  // (out, in / 32) bf16
  int64_t shape[2] = {0, 0};
};

// Row r of a float tensor as bf16 bits (F32/F16 rounded to nearest even).
void RowToBf16(const TensorView& t, int64_t r, std::vector<float>* tmp, uint16_t* out) {
  const int64_t n = t.cols();
  if (t.dtype == DType::kBF16) {
    std::memcpy(out, t.row(r), static_cast<size_t>(n) * 2);
    return;
  }
  tmp->resize(static_cast<size_t>(n));
  DequantizeRow(t.dtype, t.row(r), tmp->data(), n);
  for (int64_t i = 0; i < n; ++i) out[i] = F32ToBF16((*tmp)[i]);
}

// Element i of a BlockQ4_BF16 as the stored nibble (q + 8).
inline uint32_t Nibble(const BlockQ4_BF16& b, int i) {
  return i < 16 ? b.qs[i] & 0xfu : static_cast<uint32_t>(b.qs[i - 16] >> 4);
}

// Quantizes rows [r0, r1) of `t`; returns the first row holding a non-finite
// value (and its column in *bad_col), or -1.
int64_t QuantizeRows(const TensorView& t, int64_t r0, int64_t r1, Packed* p, int64_t* bad_col) {
  const int64_t in = t.cols(), groups = in / kQuantBlock;
  std::vector<uint16_t> row(static_cast<size_t>(in));
  std::vector<float> tmp;
  std::vector<BlockQ4_BF16> blocks(static_cast<size_t>(groups));
  for (int64_t r = r0; r < r1; ++r) {
    RowToBf16(t, r, &tmp, row.data());
    for (int64_t i = 0; i < in; ++i) {
      if ((row[i] & 0x7f80) == 0x7f80) {  // exponent all ones: Inf or NaN
        *bad_col = i;
        return r;
      }
    }
    QuantizeRowQ4_BF16(row.data(), blocks.data(), in);
    int32_t* words = p->packed.data() + r * (in / 8);
    for (int64_t g = 0; g < groups; ++g) {
      p->scale[r * groups + g] = blocks[g].d;
      // pack_to_int32: element j of the group at bits 4 (j % 8) of word j / 8.
      for (int w = 0; w < 4; ++w) {
        uint32_t word = 0;
        for (int j = 0; j < 8; ++j) word |= Nibble(blocks[g], w * 8 + j) << (4 * j);
        words[g * 4 + w] = static_cast<int32_t>(word);
      }
    }
  }
  return -1;
}

Status Quantize(const std::string& file, const TensorView& t, int threads, Packed* p) {
  if (t.shape.size() != 2 ||
      (t.dtype != DType::kBF16 && t.dtype != DType::kF16 && t.dtype != DType::kF32)) {
    return InvalidArgumentError(fmt::format("{}: tensor '{}': expected a 2-D BF16/F16/F32 Linear "
                                            "weight to quantize, found {} {} (add its module to "
                                            "--ignore)",
                                            file, t.name, SafetensorsDTypeName(t.dtype),
                                            ShapeToString(t.shape)));
  }
  const int64_t out = t.shape[0], in = t.shape[1];
  if (in % kQuantBlock != 0) {
    return InvalidArgumentError(fmt::format("{}: tensor '{}' {}: in_features {} is not a multiple "
                                            "of the group size {} (add its module to --ignore)",
                                            file, t.name, ShapeToString(t.shape), in, kQuantBlock));
  }
  p->packed.assign(static_cast<size_t>(out * in / 8), 0);
  p->scale.assign(static_cast<size_t>(out * in / kQuantBlock), 0);
  p->shape[0] = out;
  p->shape[1] = in;
  const int n = static_cast<int>(std::clamp<int64_t>(out / 64, 1, threads));
  std::vector<int64_t> bad_row(n, -1), bad_col(n, 0);
  std::vector<std::thread> pool;
  auto work = [&](int i) {
    bad_row[i] = QuantizeRows(t, out * i / n, out * (i + 1) / n, p, &bad_col[i]);
  };
  for (int i = 1; i < n; ++i) pool.emplace_back(work, i);
  work(0);
  for (std::thread& th : pool) th.join();
  for (int i = 0; i < n; ++i) {
    if (bad_row[i] >= 0) {
      return InvalidArgumentError(fmt::format("{}: tensor '{}': element [{}, {}] is not finite: "
                                              "cannot quantize",
                                              file, t.name, bad_row[i], bad_col[i]));
    }
  }
  return Status::Ok();
}

bool HasQuantizationConfig(const json& config) {
  auto has = [](const json& j) {
    return j.is_object() && j.contains("quantization_config") && !j["quantization_config"].is_null();
  };
  return has(config) || (config.contains("text_config") && has(config["text_config"]));
}

// Input shard file names (relative to the folder), and the index's metadata.
StatusOr<std::vector<std::string>> InputFiles(const ModelSource& src) {
  std::vector<std::string> files;
  if (src.format == WeightsFormat::kSafetensorsIndex) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(src.index_file));
    json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
        !index["weight_map"].is_object()) {
      return CorruptionError(src.index_file + ": expected an object with a 'weight_map' object");
    }
    std::set<std::string> uniq;
    for (const auto& [name, f] : index["weight_map"].items()) {
      if (!f.is_string() || f.get<std::string>().find('/') != std::string::npos) {
        return CorruptionError(fmt::format("{}: weight_map['{}'] is not a file name in the folder",
                                           src.index_file, name));
      }
      uniq.insert(f.get<std::string>());
    }
    files.assign(uniq.begin(), uniq.end());
  } else if (src.format == WeightsFormat::kSafetensors ||
             src.format == WeightsFormat::kSafetensorsShards) {
    for (const std::string& f : src.weight_files) files.push_back(fs::path(f).filename().string());
  } else {
    return InvalidArgumentError(fmt::format("{}: expected a safetensors model folder, found {}",
                                            src.path, WeightsFormatName(src.format)));
  }
  return files;
}

bool IsWeightFile(const std::string& name) {
  for (const char* ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".ckpt"}) {
    if (EndsWith(name, ext)) return true;
  }
  return name == "model.safetensors.index.json" || name == "config.json";
}

}  // namespace

std::vector<std::string> DefaultCompressedTensorsIgnore() {
  return {
      R"(re:.*lm_head$)",
      R"(re:.*embed_tokens$)",
      R"(re:.*self_attn\..*)",
      R"(re:.*shared_experts\..*)",
      R"(re:.*mlp\.(gate|up|down)_proj$)",
      R"(re:.*mlp\.gate$)",
      R"(re:.*(eh_proj|shared_head\..*)$)",
      R"(re:(vision_tower|mm_projector)\..*)",
  };
}

std::string CompressedTensorsQuantizationConfig(const std::vector<std::string>& ignore) {
  json weights = {{"dynamic", false},  {"group_size", kQuantBlock}, {"num_bits", 4},
                  {"strategy", "group"}, {"symmetric", true},       {"type", "int"}};
  json group = {{"format", "pack-quantized"},
                {"input_activations", nullptr},
                {"output_activations", nullptr},
                {"targets", {"Linear"}},
                {"weights", weights}};
  json qc = {{"config_groups", {{"group_0", group}}},
             {"format", "pack-quantized"},
             {"global_compression_ratio", nullptr},
             {"ignore", ignore},
             {"kv_cache_scheme", nullptr},
             {"moe_sparsity_config", nullptr},
             {"quant_method", "compressed-tensors"},
             {"quantization_status", "compressed"},
             {"sparsity_config", json::object()},
             {"transform_config", json::object()},
             {"version", kLibraryVersion}};
  return qc.dump();
}

Status WriteCompressedTensorsModel(const std::string& model_dir, const std::string& out_dir,
                                   const CompressedTensorsOptions& options, int* n_quantized) {
  ASSIGN_OR_RETURN(ModelSource src, ResolveModelSource(model_dir));
  ASSIGN_OR_RETURN(std::vector<std::string> files, InputFiles(src));
  ASSIGN_OR_RETURN(IgnoreList ignore, IgnoreList::Create(options.ignore));
  ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(src.config_file));
  json config = json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return CorruptionError(src.config_file + ": not a JSON object");
  }
  if (HasQuantizationConfig(config)) {
    return InvalidArgumentError(fmt::format("{}: the model is already quantized "
                                            "(quantization_config is set); expected BF16/F32 "
                                            "weights",
                                            src.config_file));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return IoError(fmt::format("{}: cannot create the folder: {}", out_dir, ec.message()));
  if (fs::equivalent(out_dir, src.dir, ec)) {
    return InvalidArgumentError(fmt::format("--out {} is the model folder itself: expected a new "
                                            "folder",
                                            out_dir));
  }
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  int quantized = 0;
  size_t total_size = 0;
  json weight_map = json::object();
  for (const std::string& name : files) {
    const std::string path = src.dir + "/" + name;
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mf, MappedFile::Open(path, MapOptions{}));
    ASSIGN_OR_RETURN(std::vector<TensorView> views, ParseSafetensors(mf->data(), mf->size(), path));
    SafetensorsWriter writer;
    writer.SetMetadata("format", "pt");
    std::deque<Packed> packed;  // stable addresses for the writer
    for (const TensorView& t : views) {
      auto add_raw = [&](const std::string& n, DType dt, std::vector<int64_t> shape,
                         const void* data, size_t bytes) -> Status {
        weight_map[n] = name;
        total_size += bytes;
        return writer.AddRawTensor(n, dt, shape, data, bytes);
      };
      if (!IsTargeted(t.name, ignore)) {
        RETURN_IF_ERROR(add_raw(t.name, t.dtype, t.shape, t.data, t.nbytes));
        continue;
      }
      Packed& p = packed.emplace_back();
      RETURN_IF_ERROR(Quantize(path, t, threads, &p));
      const std::string base = t.name.substr(0, t.name.size() - 7);  // minus ".weight"
      const int64_t out = p.shape[0], in = p.shape[1];
      RETURN_IF_ERROR(add_raw(base + ".weight_packed", DType::kI32, {out, in / 8}, p.packed.data(),
                              p.packed.size() * 4));
      RETURN_IF_ERROR(add_raw(base + ".weight_scale", DType::kBF16, {out, in / kQuantBlock},
                              p.scale.data(), p.scale.size() * 2));
      RETURN_IF_ERROR(add_raw(base + ".weight_shape", DType::kI64, {2}, p.shape, 16));
      ++quantized;
    }
    RETURN_IF_ERROR(writer.Write(out_dir + "/" + name));
  }
  if (quantized == 0) {
    return InvalidArgumentError(fmt::format("{}: no weight matched (targets: every Linear weight "
                                            "not in the ignore list; the default ignores all but "
                                            "the routed experts mlp.experts.*): nothing to quantize",
                                            model_dir));
  }
  if (src.format == WeightsFormat::kSafetensorsIndex) {
    json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
    RETURN_IF_ERROR(WriteStringToFile(out_dir + "/model.safetensors.index.json", index.dump(2)));
  }
  config["quantization_config"] = json::parse(CompressedTensorsQuantizationConfig(options.ignore));
  RETURN_IF_ERROR(WriteStringToFile(out_dir + "/config.json", config.dump(2)));
  for (const fs::directory_entry& e : fs::directory_iterator(src.dir, ec)) {
    const std::string fname = e.path().filename().string();
    if (!e.is_regular_file() || IsWeightFile(fname)) continue;
    fs::copy_file(e.path(), fs::path(out_dir) / fname, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return IoError(fmt::format("cannot copy {} to {}: {}", e.path().string(), out_dir,
                                 ec.message()));
    }
  }
  if (n_quantized != nullptr) *n_quantized = quantized;
  return Status::Ok();
}

}  // namespace specd
