#include "loader/compressed_tensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "loader/safetensors_reader.h"
#include "tensor/dtype.h"

namespace specd {

const char kFp8Unsupported[] =
    "FP8 block-quantized checkpoints are not supported; convert them to BF16 first "
    "(DeepSeek-V3's inference/fp8_cast_bf16.py)";

namespace {

using json = nlohmann::json;

constexpr int kBits = 4;
constexpr int kGroup = 32;
// Largest weight dimension accepted from weight_shape.
constexpr int64_t kMaxDim = int64_t{1} << 40;

// "source: path = value: supported: what".
Status UnsupportedField(const std::string& source, const std::string& path, const json& value,
                        const std::string& supported) {
  return UnsupportedError(
      fmt::format("{}: {} = {}: supported: {}", source, path, value.dump(), supported));
}

bool IsNullOrAbsent(const json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null();
}

// key must equal `want` (a JSON value); absent counts as a mismatch unless
// `absent_ok`.
Status Expect(const std::string& source, const json& obj, const std::string& path,
              const char* key, const json& want, bool absent_ok = false) {
  if (!obj.contains(key)) {
    if (absent_ok) return Status::Ok();
    return UnsupportedError(fmt::format("{}: {}.{} is missing: supported: {}", source, path, key,
                                        want.dump()));
  }
  if (obj[key] != want) return UnsupportedField(source, path + "." + key, obj[key], want.dump());
  return Status::Ok();
}

Status CheckWeights(const std::string& source, const std::string& path, const json& w) {
  if (!w.is_object()) return UnsupportedField(source, path, w, "an object (W4A16 weights)");
  RETURN_IF_ERROR(Expect(source, w, path, "num_bits", kBits));
  RETURN_IF_ERROR(Expect(source, w, path, "type", "int"));
  RETURN_IF_ERROR(Expect(source, w, path, "symmetric", true));
  RETURN_IF_ERROR(Expect(source, w, path, "strategy", "group"));
  RETURN_IF_ERROR(Expect(source, w, path, "group_size", kGroup));
  RETURN_IF_ERROR(Expect(source, w, path, "dynamic", false, /*absent_ok=*/true));
  for (const char* key : {"actorder", "block_structure", "scale_dtype"}) {
    if (!IsNullOrAbsent(w, key)) return UnsupportedField(source, path + "." + key, w[key], "null");
  }
  return Status::Ok();
}

Status CheckGroup(const std::string& source, const std::string& path, const json& g) {
  if (!g.is_object()) {
    return UnsupportedField(source, path, g, "a quantization scheme object");
  }
  if (!g.contains("weights")) {
    return UnsupportedError(
        fmt::format("{}: {}.weights is missing: supported: W4A16 weights", source, path));
  }
  RETURN_IF_ERROR(CheckWeights(source, path + ".weights", g["weights"]));
  for (const char* key : {"input_activations", "output_activations"}) {
    if (!IsNullOrAbsent(g, key)) {
      return UnsupportedField(source, path + "." + key, g[key], "null (W4A16: f32 activations)");
    }
  }
  if (!IsNullOrAbsent(g, "format") && g["format"] != "pack-quantized") {
    return UnsupportedField(source, path + ".format", g["format"], "\"pack-quantized\" or null");
  }
  return Status::Ok();
}

// Reads 2 positive integers from X.weight_shape.
StatusOr<std::pair<int64_t, int64_t>> ReadWeightShape(const std::string& source,
                                                      const TensorView& t) {
  auto bad = [&](const std::string& found) {
    return CorruptionError(fmt::format("{}: tensor '{}': expected 2 positive integers [out, in] "
                                       "(I32 or I64, shape [2]), found {}",
                                       source, t.name, found));
  };
  if ((t.dtype != DType::kI32 && t.dtype != DType::kI64) || t.shape != std::vector<int64_t>{2}) {
    return bad(fmt::format("{} {}", SafetensorsDTypeName(t.dtype), ShapeToString(t.shape)));
  }
  int64_t v[2];
  for (int i = 0; i < 2; ++i) {
    if (t.dtype == DType::kI32) {
      int32_t x;
      std::memcpy(&x, static_cast<const uint8_t*>(t.data) + 4 * i, 4);
      v[i] = x;
    } else {
      std::memcpy(&v[i], static_cast<const uint8_t*>(t.data) + 8 * i, 8);
    }
  }
  if (v[0] <= 0 || v[1] <= 0 || v[0] > kMaxDim || v[1] > kMaxDim) {
    return bad(fmt::format("[{}, {}]", v[0], v[1]));
  }
  return std::pair{v[0], v[1]};
}

struct Triple {
  std::string base;  // "model.layers.3.mlp.experts.7.gate_proj"
  TensorView packed, scale;
  int64_t out = 0, in = 0;
};

// Scale row r of `scale` as bf16 bits; false (with the column and value) when
// a value is not exact in bf16.
bool ScaleRowBf16(const TensorView& scale, int64_t r, int64_t n, uint16_t* out, int64_t* bad_col,
                  float* bad_value) {
  const uint8_t* p = scale.row(r);
  for (int64_t c = 0; c < n; ++c) {
    float f;
    if (scale.dtype == DType::kBF16) {
      std::memcpy(&out[c], p + 2 * c, 2);
      continue;
    }
    if (scale.dtype == DType::kF16) {
      uint16_t h;
      std::memcpy(&h, p + 2 * c, 2);
      f = F16ToF32(h);
    } else {
      std::memcpy(&f, p + 4 * c, 4);
    }
    out[c] = F32ToBF16(f);
    if (!(BF16ToF32(out[c]) == f)) {  // NaN scales are not exact either
      *bad_col = c;
      *bad_value = f;
      return false;
    }
  }
  return true;
}

// Converts one triple into `dst` (out * in / 32 blocks).
Status ConvertTriple(const std::string& source, const Triple& t, uint8_t* dst) {
  const int64_t groups = t.in / kGroup;
  const size_t row_bytes = RowBytes(DType::kQ4_BF16, t.in);
  const size_t packed_row = static_cast<size_t>(t.in / 2);
  std::vector<uint16_t> scales(static_cast<size_t>(groups));
  for (int64_t r = 0; r < t.out; ++r) {
    int64_t bad_col = 0;
    float f = 0;
    if (!ScaleRowBf16(t.scale, r, groups, scales.data(), &bad_col, &f)) {
      return UnsupportedError(fmt::format(
          "{}: tensor '{}': scale [{}, {}] = {} is not exact in bf16 (the Q4_BF16 weights keep "
          "bf16 scales; expected BF16 scales, or {} values that bf16 holds exactly)",
          source, t.scale.name, r, bad_col, f, DTypeName(t.scale.dtype)));
    }
    RepackInt4Row(static_cast<const uint8_t*>(t.packed.data) + r * packed_row, scales.data(), t.in,
                  dst + r * row_bytes);
  }
  return Status::Ok();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A list of module names and "re:" regexes (compressed-tensors' `ignore` and
// a scheme's `targets`): null/absent is an empty list; anything but an array
// of strings, or a regex that does not compile, is an error naming the field.
Status ParsePatternList(const std::string& source, const std::string& path, const json& obj,
                        const char* key, std::vector<std::string>* out) {
  out->clear();
  if (IsNullOrAbsent(obj, key)) return Status::Ok();
  const json& v = obj[key];
  if (!v.is_array()) {
    return UnsupportedField(source, path + "." + key, v, "a list of module names / \"re:\" regexes");
  }
  for (const json& e : v) {
    if (!e.is_string()) {
      return UnsupportedField(source, path + "." + key, v, "a list of strings");
    }
    const std::string p = e.get<std::string>();
    if (p.rfind("re:", 0) == 0) {
      try {
        std::regex re(p.substr(3));
      } catch (const std::regex_error& err) {
        return InvalidArgumentError(fmt::format("{}: {}.{}: '{}' is not a valid regular "
                                                "expression ({})",
                                                source, path, key, p, err.what()));
      }
    }
    out->push_back(p);
  }
  return Status::Ok();
}

// compressed-tensors matching: "re:X" matches a module name that X matches
// from its start (Python re.match); anything else names a module exactly or
// is a layer class ("Linear"), which matches every quantized linear.
bool PatternMatches(const std::string& pattern, const std::string& module, bool class_names) {
  if (pattern.rfind("re:", 0) == 0) {
    return std::regex_search(module, std::regex(pattern.substr(3)),
                             std::regex_constants::match_continuous);
  }
  if (class_names && pattern.find('.') == std::string::npos && !pattern.empty() &&
      std::isupper(static_cast<unsigned char>(pattern[0]))) {
    return true;
  }
  return pattern == module;
}

const json* FindQuantizationConfig(const json& root, std::string* path) {
  *path = "quantization_config";
  if (!IsNullOrAbsent(root, "quantization_config")) return &root["quantization_config"];
  if (root.contains("text_config") && root["text_config"].is_object() &&
      !IsNullOrAbsent(root["text_config"], "quantization_config")) {
    *path = "text_config.quantization_config";
    return &root["text_config"]["quantization_config"];
  }
  return nullptr;
}

}  // namespace

StatusOr<WeightQuantization> ParseQuantizationConfig(const std::string& config_json,
                                                     const std::string& source) {
  json root = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return CorruptionError(source + ": not a JSON object");
  }
  std::string path = "quantization_config";
  const json* qc = nullptr;
  if (!IsNullOrAbsent(root, "quantization_config")) {
    qc = &root["quantization_config"];
  } else if (root.contains("text_config") && root["text_config"].is_object() &&
             !IsNullOrAbsent(root["text_config"], "quantization_config")) {
    qc = &root["text_config"]["quantization_config"];
    path = "text_config.quantization_config";
  }
  if (qc == nullptr) return WeightQuantization::kNone;
  if (!qc->is_object()) return UnsupportedField(source, path, *qc, "an object");
  if (!qc->contains("quant_method") || !(*qc)["quant_method"].is_string()) {
    return UnsupportedError(fmt::format("{}: {}.quant_method is missing: supported: "
                                        "\"compressed-tensors\"",
                                        source, path));
  }
  const std::string method = (*qc)["quant_method"].get<std::string>();
  if (method == "fp8") {
    return UnsupportedError(fmt::format("{}: {}.quant_method = \"fp8\": {}", source, path,
                                        kFp8Unsupported));
  }
  if (method != "compressed-tensors") {
    return UnsupportedField(source, path + ".quant_method", (*qc)["quant_method"],
                            "\"compressed-tensors\"");
  }
  RETURN_IF_ERROR(Expect(source, *qc, path, "format", "pack-quantized"));
  if (!qc->contains("config_groups") || !(*qc)["config_groups"].is_object() ||
      (*qc)["config_groups"].empty()) {
    return UnsupportedError(fmt::format("{}: {}.config_groups: expected a non-empty object of "
                                        "quantization schemes",
                                        source, path));
  }
  for (const auto& [name, g] : (*qc)["config_groups"].items()) {
    RETURN_IF_ERROR(CheckGroup(source, path + ".config_groups." + name, g));
    std::vector<std::string> targets;
    RETURN_IF_ERROR(
        ParsePatternList(source, path + ".config_groups." + name, g, "targets", &targets));
  }
  // "compressed": the weights are stored packed (what this loader reads);
  // "frozen" / "calibration" / "initialized" describe unpacked weights.
  if (!IsNullOrAbsent(*qc, "quantization_status") &&
      (*qc)["quantization_status"] != "compressed") {
    return UnsupportedField(source, path + ".quantization_status", (*qc)["quantization_status"],
                            "\"compressed\" (weights stored packed)");
  }
  std::vector<std::string> ignore;
  RETURN_IF_ERROR(ParsePatternList(source, path, *qc, "ignore", &ignore));
  if (!IsNullOrAbsent(*qc, "kv_cache_scheme")) {
    return UnsupportedField(source, path + ".kv_cache_scheme", (*qc)["kv_cache_scheme"], "null");
  }
  // Transforms (rotations) and sparsity change the weights' meaning.
  for (const char* key : {"transform_config", "sparsity_config"}) {
    if (!IsNullOrAbsent(*qc, key) && !(*qc)[key].empty()) {
      return UnsupportedField(source, path + "." + key, (*qc)[key], "{} or null");
    }
  }
  return WeightQuantization::kPackQuantizedInt4;
}

void RepackInt4Row(const uint8_t* packed, const uint16_t* scales_bf16, int64_t in,
                   uint8_t* blocks) {
  for (int64_t g = 0; g < in / kGroup; ++g) {
    // Byte j of the group's 16 packed bytes: element 2j (low nibble) and 2j + 1.
    const uint8_t* p = packed + g * (kGroup / 2);
    BlockQ4_BF16 b;
    b.d = scales_bf16[g];
    for (int i = 0; i < kGroup / 2; ++i) {
      const int lo = (p[i / 2] >> (4 * (i & 1))) & 0xf;
      const int hi = (p[(i + 16) / 2] >> (4 * (i & 1))) & 0xf;
      b.qs[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
    std::memcpy(blocks + g * sizeof(BlockQ4_BF16), &b, sizeof(b));
  }
}

Status UnpackInt4Triples(WeightQuantization quantization, const std::string& source,
                         std::map<std::string, TensorView>* tensors,
                         std::vector<std::vector<uint8_t>>* buffers, int* n_converted) {
  static const char* const kSuffixes[] = {".weight_packed", ".weight_scale", ".weight_shape"};
  std::set<std::string> bases;
  for (const auto& [name, t] : *tensors) {
    if (EndsWith(name, ".weight_packed")) {
      if (quantization == WeightQuantization::kNone) {
        return UnsupportedError(fmt::format(
            "{}: tensor '{}' is a compressed-tensors packed weight, but config.json has no "
            "quantization_config (expected quant_method \"compressed-tensors\", format "
            "\"pack-quantized\")",
            source, name));
      }
      bases.insert(name.substr(0, name.size() - 14));
    } else if (quantization != WeightQuantization::kNone) {
      for (const char* s : {".weight_scale", ".weight_shape"}) {
        if (EndsWith(name, s)) bases.insert(name.substr(0, name.size() - 13));
      }
    }
    if (EndsWith(name, ".weight_zero_point")) {
      return UnsupportedError(fmt::format("{}: tensor '{}': asymmetric zero points are not "
                                          "supported (symmetric INT4 only)",
                                          source, name));
    }
    if (EndsWith(name, ".weight_g_idx")) {
      return UnsupportedError(fmt::format("{}: tensor '{}': activation-order group indices are "
                                          "not supported (actorder null only)",
                                          source, name));
    }
  }
  std::vector<Triple> triples;
  for (const std::string& base : bases) {
    for (const char* s : kSuffixes) {
      if (tensors->count(base + s) == 0) {
        std::string have;
        for (const char* o : kSuffixes) {
          if (tensors->count(base + o)) have += (have.empty() ? "" : ", ") + base + o;
        }
        return CorruptionError(fmt::format("{}: tensor '{}{}' is missing (a pack-quantized "
                                           "weight needs {}.weight_packed, .weight_scale and "
                                           ".weight_shape; found {})",
                                           source, base, s, base, have));
      }
    }
    if (tensors->count(base + ".weight")) {
      return CorruptionError(fmt::format("{}: tensor '{}.weight' is present beside its packed "
                                         "form '{}.weight_packed': expected one of them",
                                         source, base, base));
    }
    Triple t;
    t.base = base;
    t.packed = tensors->at(base + ".weight_packed");
    t.scale = tensors->at(base + ".weight_scale");
    ASSIGN_OR_RETURN(auto shape, ReadWeightShape(source, tensors->at(base + ".weight_shape")));
    std::tie(t.out, t.in) = shape;
    if (t.in % kGroup != 0) {
      return UnsupportedError(fmt::format("{}: tensor '{}.weight_shape' = [{}, {}]: in_features "
                                          "{} is not a multiple of the group size {}",
                                          source, base, t.out, t.in, t.in, kGroup));
    }
    const std::vector<int64_t> packed_shape{t.out, t.in * kBits / 32};
    if (t.packed.dtype != DType::kI32 || t.packed.shape != packed_shape) {
      return CorruptionError(fmt::format("{}: tensor '{}': expected I32 {} (weight_shape [{}, {}] "
                                         "at {} bits), found {} {}",
                                         source, t.packed.name, ShapeToString(packed_shape), t.out,
                                         t.in, kBits, SafetensorsDTypeName(t.packed.dtype),
                                         ShapeToString(t.packed.shape)));
    }
    const std::vector<int64_t> scale_shape{t.out, t.in / kGroup};
    if ((t.scale.dtype != DType::kBF16 && t.scale.dtype != DType::kF16 &&
         t.scale.dtype != DType::kF32) ||
        t.scale.shape != scale_shape) {
      return CorruptionError(fmt::format("{}: tensor '{}': expected BF16 (or F16/F32) {} "
                                         "(weight_shape [{}, {}], group {}), found {} {}",
                                         source, t.scale.name, ShapeToString(scale_shape), t.out,
                                         t.in, kGroup, SafetensorsDTypeName(t.scale.dtype),
                                         ShapeToString(t.scale.shape)));
    }
    triples.push_back(std::move(t));
  }
  if (n_converted != nullptr) *n_converted = static_cast<int>(triples.size());
  if (triples.empty()) return Status::Ok();

  // The re-layout touches every weight byte once: spread the triples over
  // the cores (a Kimi-K2 checkpoint holds hundreds of GB of them).
  std::vector<std::vector<uint8_t>> out(triples.size());
  std::vector<Status> status(triples.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < triples.size(); i = next++) {
      const Triple& t = triples[i];
      out[i].resize(RowBytes(DType::kQ4_BF16, t.in) * static_cast<size_t>(t.out));
      status[i] = ConvertTriple(source, t, out[i].data());
    }
  };
  const size_t n_threads = std::min<size_t>(
      triples.size(), std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 32));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n_threads; ++i) threads.emplace_back(work);
  work();
  for (std::thread& th : threads) th.join();
  for (const Status& st : status) RETURN_IF_ERROR(st);

  for (size_t i = 0; i < triples.size(); ++i) {
    const Triple& t = triples[i];
    for (const char* s : kSuffixes) tensors->erase(t.base + s);
    TensorView w;
    w.name = t.base + ".weight";
    w.dtype = DType::kQ4_BF16;
    w.shape = {t.out, t.in};
    w.data = out[i].data();
    w.nbytes = out[i].size();
    buffers->push_back(std::move(out[i]));
    tensors->emplace(w.name, std::move(w));
  }
  return Status::Ok();
}

Status CheckQuantizationTargets(const std::string& config_json, const std::string& source,
                                const std::string& tensor_prefix,
                                const std::map<std::string, TensorView>& tensors) {
  const json root = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Status::Ok();
  std::string path;
  const json* qc = FindQuantizationConfig(root, &path);
  if (qc == nullptr || !qc->is_object()) return Status::Ok();
  // Modules stored as INT4, named as the config names them (with the
  // file's prefix, e.g. Kimi-K2.5's "language_model.").
  std::vector<std::string> int4;
  for (const auto& [name, t] : tensors) {
    if (t.dtype == DType::kQ4_BF16 && EndsWith(name, ".weight")) {
      int4.push_back(tensor_prefix + name.substr(0, name.size() - 7));
    }
  }
  std::vector<std::string> ignore;
  RETURN_IF_ERROR(ParsePatternList(source, path, *qc, "ignore", &ignore));
  for (const std::string& m : int4) {
    for (const std::string& p : ignore) {
      if (PatternMatches(p, m, /*class_names=*/false)) {
        return InvalidArgumentError(fmt::format(
            "{}: module '{}' is stored as INT4, but {}.ignore entry '{}' says it is not "
            "quantized",
            source, m, path, p));
      }
    }
  }
  if (!qc->contains("config_groups") || !(*qc)["config_groups"].is_object()) return Status::Ok();
  for (const auto& [name, g] : (*qc)["config_groups"].items()) {
    std::vector<std::string> targets;
    RETURN_IF_ERROR(ParsePatternList(source, path + ".config_groups." + name, g, "targets",
                                     &targets));
    bool any = false;
    for (const std::string& m : int4) {
      for (const std::string& p : targets) any = any || PatternMatches(p, m, true);
      if (any) break;
    }
    if (!any) {
      return InvalidArgumentError(fmt::format(
          "{}: {}.config_groups.{}.targets = {} match no INT4 tensor in the file ({} stored as "
          "INT4)",
          source, path, name, g.contains("targets") ? g["targets"].dump() : "[]", int4.size()));
    }
  }
  return Status::Ok();
}

}  // namespace specd
