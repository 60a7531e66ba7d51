// Typed access to the keys of a JSON object (config.json and friends), with
// errors naming the file, the key (with its parent path), the expected and the
// found type. Internal to the loader.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace specd {

inline const char* JsonTypeName(const nlohmann::json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();  // "null", "string", "array", "object", "boolean"
}

// Typed access to one JSON object, with errors naming the file, the key (with
// its parent path), the expected and the found type.
class Fields {
 public:
  Fields(const nlohmann::json& obj, std::string source, std::string prefix = "")
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Absent and null both count as "not set" (HF writes "head_dim": null).
  bool Has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }
  const nlohmann::json& At(const char* key) const { return obj_[key]; }
  std::string Name(const char* key) const { return prefix_ + key; }

  Status Missing(const char* key) const {
    return NotFoundError(fmt::format("{}: missing required key '{}'", source_, Name(key)));
  }
  Status WrongType(const char* key, const char* expected) const {
    return InvalidArgumentError(fmt::format("{}: key '{}': expected {}, found {}", source_,
                                            Name(key), expected, JsonTypeName(obj_[key])));
  }

  StatusOr<int64_t> Int(const char* key) const {
    if (!Has(key)) return Missing(key);
    const nlohmann::json& v = obj_[key];
    if (v.is_number_integer()) return v.get<int64_t>();
    // 2048.0 is accepted; 2048.5 is not.
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) < 9e15) {
      return static_cast<int64_t>(v.get<double>());
    }
    return WrongType(key, "integer");
  }
  StatusOr<int64_t> Int(const char* key, int64_t def) const {
    if (!Has(key)) return def;
    return Int(key);
  }
  StatusOr<double> Number(const char* key, double def) const {
    if (!Has(key)) return def;
    const nlohmann::json& v = obj_[key];
    if (!v.is_number()) return WrongType(key, "number");
    return v.get<double>();
  }
  StatusOr<bool> Bool(const char* key, bool def) const {
    if (!Has(key)) return def;
    const nlohmann::json& v = obj_[key];
    if (!v.is_boolean()) return WrongType(key, "boolean");
    return v.get<bool>();
  }
  StatusOr<std::string> String(const char* key, const std::string& def) const {
    if (!Has(key)) return def;
    const nlohmann::json& v = obj_[key];
    if (!v.is_string()) return WrongType(key, "string");
    return v.get<std::string>();
  }
  // An integer or a list of integers (eos_token_id); absent -> empty.
  StatusOr<std::vector<int64_t>> IntOrList(const char* key) const {
    std::vector<int64_t> out;
    if (!Has(key)) return out;
    const nlohmann::json& v = obj_[key];
    if (v.is_number_integer()) {
      out.push_back(v.get<int64_t>());
      return out;
    }
    if (!v.is_array()) return WrongType(key, "integer or list of integers");
    for (const nlohmann::json& e : v) {
      if (!e.is_number_integer()) {
        return InvalidArgumentError(fmt::format("{}: key '{}': expected a list of integers, found "
                                                "an element of type {}",
                                                source_, Name(key), JsonTypeName(e)));
      }
      out.push_back(e.get<int64_t>());
    }
    return out;
  }

 private:
  const nlohmann::json& obj_;
  std::string source_;
  std::string prefix_;
};

// Narrows a parsed integer into an int field, naming the key when it cannot fit.
inline Status ToInt(const std::string& source, const std::string& key, int64_t v, int* out) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return OutOfRangeError(fmt::format("{}: key '{}' = {}: out of range", source, key, v));
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace specd
