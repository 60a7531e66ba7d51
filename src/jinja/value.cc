#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "jinja/pystr.h"
#include "jinja/strings.h"

namespace specd::jinja {

void Fail(std::string message, SourcePos pos) { throw JinjaError{std::move(message), pos, false}; }

const Value* Object::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::Set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

const Value* CallArgs::Get(size_t i, std::string_view keyword) const {
  if (i < positional.size()) return &positional[i];
  return keyword.empty() ? nullptr : Keyword(keyword);
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNull: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return tuple_ ? "tuple" : "list";
    case Kind::kObject: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNull: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;  // nan is true, as in Python
    case Kind::kString: return !s_.empty();
    case Kind::kArray: return !array_->empty();
    case Kind::kObject: return !object_->entries.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

const void* Value::Identity() const {
  switch (kind_) {
    case Kind::kArray: return array_.get();
    case Kind::kObject: return object_.get();
    case Kind::kNamespace: return ns_.get();
    case Kind::kFunction: return fn_.get();
    default: return nullptr;
  }
}

namespace {

Value FromJsonAt(const nlohmann::ordered_json& j, int depth) {
  if (depth > 256) Fail("request JSON nested deeper than 256 levels");
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::Null();
    case T::boolean: return Value::Bool(j.get<bool>());
    case T::number_integer: return Value::Int(j.get<int64_t>());
    case T::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Int(static_cast<int64_t>(u));
      }
      return Value::Float(static_cast<double>(u));
    }
    case T::number_float: return Value::Float(j.get<double>());
    case T::string: return Value::String(j.get<std::string>());
    case T::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonAt(e, depth + 1));
      return Value::MakeArray(std::move(items));
    }
    case T::object: {
      Object obj;
      obj.entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) obj.Set(it.key(), FromJsonAt(it.value(), depth + 1));
      return Value::MakeObject(std::move(obj));
    }
    default: return Value();  // binary / discarded: not produced by JSON text
  }
}

}  // namespace

Value FromJson(const nlohmann::ordered_json& j) { return FromJsonAt(j, 0); }

namespace {

void AppendHex4(unsigned v, std::string* out) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", v & 0xFFFF);
  out->append(buf);
}

}  // namespace

std::string JsonQuote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t cp = NextCodePoint(s, &i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      AppendHex4(cp, &out);
    } else if (ensure_ascii && cp >= 0x7F) {
      // Python escapes UTF-16 code units: astral characters become a
      // surrogate pair.
      if (cp >= 0x10000) {
        char32_t c = cp - 0x10000;
        AppendHex4(0xD800 + (c >> 10), &out);
        AppendHex4(0xDC00 + (c & 0x3FF), &out);
      } else {
        AppendHex4(cp, &out);
      }
    } else if (cp == 0xFFFD && i == start + 1 && static_cast<unsigned char>(s[start]) >= 0x80) {
      out += "\xEF\xBF\xBD";  // invalid byte
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += "\"";
  return out;
}

namespace {

void ToJsonImpl(const Value& v, const JsonOptions& opts, int depth, std::string* out) {
  if (depth > 512) Fail("tojson: value nested too deeply");
  const bool pretty = opts.indent >= 0;
  std::string item_sep, key_sep;
  if (opts.has_separators) {
    item_sep = opts.item_separator;
    key_sep = opts.key_separator;
  } else {
    item_sep = pretty ? "," : ", ";
    key_sep = ": ";
  }
  switch (v.kind()) {
    case Value::Kind::kNull: *out += "null"; return;
    case Value::Kind::kBool: *out += v.bool_value() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.int_value()); return;
    case Value::Kind::kFloat: {
      const double d = v.float_value();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyFloatRepr(d);
      return;
    }
    case Value::Kind::kString: *out += JsonQuote(v.str(), opts.ensure_ascii); return;
    case Value::Kind::kArray:
    case Value::Kind::kObject: break;
    default: Fail(std::string("Object of type ") + v.TypeName() + " is not JSON serializable");
  }
  const std::string indent(pretty ? opts.indent : 0, ' ');
  std::string base_pad = "\n";
  for (int i = 0; i < depth; ++i) base_pad += indent;
  const std::string child_pad = base_pad + indent;
  if (v.is_array()) {
    const Array& items = v.array();
    *out += "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) *out += item_sep;
      if (pretty) *out += child_pad;
      ToJsonImpl(items[i], opts, depth + 1, out);
    }
    if (pretty && !items.empty()) *out += base_pad;
    *out += "]";
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.object().entries) entries.push_back(&e);
  if (opts.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto* a, const auto* b) { return a->first < b->first; });
  }
  *out += "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) *out += item_sep;
    if (pretty) *out += child_pad;
    *out += JsonQuote(entries[i]->first, opts.ensure_ascii);
    *out += key_sep;
    ToJsonImpl(entries[i]->second, opts, depth + 1, out);
  }
  if (pretty && !entries.empty()) *out += base_pad;
  *out += "}";
}

}  // namespace

std::string ToJson(const Value& v, const JsonOptions& opts) {
  std::string out;
  ToJsonImpl(v, opts, 0, &out);
  return out;
}

bool PyEquals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind() != K::kFloat && b.kind() != K::kFloat) return a.integer() == b.integer();
    return a.numeric() == b.numeric();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNull: return true;
    case K::kString: return a.str() == b.str();
    case K::kArray: {
      if (a.is_tuple() != b.is_tuple() || a.array().size() != b.array().size()) return false;
      for (size_t i = 0; i < a.array().size(); ++i) {
        if (!PyEquals(a.array()[i], b.array()[i])) return false;
      }
      return true;
    }
    case K::kObject: {
      const auto& ea = a.object().entries;
      if (ea.size() != b.object().entries.size()) return false;
      for (const auto& [k, v] : ea) {
        const Value* other = b.object().Find(k);
        if (other == nullptr || !PyEquals(v, *other)) return false;
      }
      return true;
    }
    default: return a.Identity() == b.Identity();
  }
}

int PyCompare(const Value& a, const Value& b, SourcePos pos) {
  if (a.is_undefined()) Fail(a.undefined_message(), pos);
  if (b.is_undefined()) Fail(b.undefined_message(), pos);
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
      return a.integer() < b.integer() ? -1 : a.integer() > b.integer() ? 1 : 0;
    }
    const double x = a.numeric(), y = b.numeric();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
  if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
    const Array &x = a.array(), &y = b.array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!PyEquals(x[i], y[i])) return PyCompare(x[i], y[i], pos);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  Fail(std::string("'<' not supported between instances of '") + a.TypeName() + "' and '" + b.TypeName() + "'",
       pos);
}

}  // namespace specd::jinja
