#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "tokenizer/jinja_strings.h"

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

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "UndefinedValue";
    case Kind::kNull: return "NullValue";
    case Kind::kBool: return "BooleanValue";
    case Kind::kInt: return "IntegerValue";
    case Kind::kFloat: return "FloatValue";
    case Kind::kString: return "StringValue";
    case Kind::kArray: return "ArrayValue";
    case Kind::kObject: return "ObjectValue";
    case Kind::kNamespace: return "NamespaceValue";
    case Kind::kFunction: return "FunctionValue";
  }
  return "?";
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNull: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0 && !std::isnan(f_);
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
    case T::number_float: {
      double d = j.get<double>();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(d));
      }
      return Value::Float(d);
    }
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

std::string JsNumberToString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]d[.ddd]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exp10 = std::stoi(sci.substr(e + 1));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;  // value = 0.digits * 10^n
  std::string out = neg ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(-n, '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += "e";
    out += (n - 1 >= 0) ? "+" : "-";
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

namespace {

// FloatValue.toString in the reference: integral floats keep one decimal.
std::string FloatToString(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && d == std::trunc(d)) {
    if (std::fabs(d) >= 1e21) return JsNumberToString(d);
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.1f", d);
    return buf;
  }
  return JsNumberToString(d);
}

// RuntimeValue.toString in the reference.
std::string RuntimeToString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNull: return "null";
    case Value::Kind::kBool: return v.bool_value() ? "true" : "false";
    case Value::Kind::kInt: return std::to_string(v.int_value());
    case Value::Kind::kFloat: return FloatToString(v.float_value());
    case Value::Kind::kString: return v.str();
    case Value::Kind::kArray:
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: return ToJson(v, JsonOptions{}, false);
    case Value::Kind::kFunction: Fail("cannot convert function '" + v.function().name + "' to a string");
  }
  return {};
}

void AppendHex4(unsigned v, std::string* out) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", v & 0xFFFF);
  out->append(buf);
}

}  // namespace

std::string RenderString(const Value& v) {
  if (v.is_undefined() || v.is_null()) return {};
  return RuntimeToString(v);
}

std::string ConcatString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt: return std::to_string(v.int_value());
    case Value::Kind::kFloat: return JsNumberToString(v.float_value());
    case Value::Kind::kArray: {
      std::string out;
      bool first = true;
      for (const Value& e : v.array()) {
        if (!first) out += ",";
        first = false;
        out += RuntimeToString(e);
      }
      return out;
    }
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: return "[object Map]";
    default: return RuntimeToString(v);
  }
}

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
      // JS makeAsciiSafe escapes UTF-16 code units: astral characters
      // become a surrogate pair.
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

void ToJsonImpl(const Value& v, const JsonOptions& opts, int depth, bool undefined_to_null,
                std::string* out) {
  if (depth > 512) Fail("tojson: value nested too deeply");
  std::string item_sep, key_sep;
  if (opts.has_separators) {
    item_sep = opts.item_separator;
    key_sep = opts.key_separator;
  } else {
    item_sep = opts.indent > 0 ? "," : ", ";
    key_sep = ": ";
  }
  switch (v.kind()) {
    case Value::Kind::kNull: *out += "null"; return;
    case Value::Kind::kUndefined: *out += undefined_to_null ? "null" : "undefined"; return;
    case Value::Kind::kBool: *out += v.bool_value() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.int_value()); return;
    case Value::Kind::kFloat:
      *out += std::isfinite(v.float_value()) ? JsNumberToString(v.float_value()) : "null";
      return;
    case Value::Kind::kString: *out += JsonQuote(v.str(), opts.ensure_ascii); return;
    case Value::Kind::kFunction: Fail("Cannot convert to JSON: FunctionValue");
    default: break;
  }
  std::string indent(opts.indent > 0 ? opts.indent : 0, ' ');
  std::string base_pad = "\n";
  for (int i = 0; i < depth; ++i) base_pad += indent;
  std::string child_pad = base_pad + indent;
  const bool pretty = opts.indent > 0;
  if (v.is_array()) {
    const Array& items = v.array();
    *out += "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) *out += item_sep;
      if (pretty) *out += child_pad;
      ToJsonImpl(items[i], opts, depth + 1, undefined_to_null, out);
    }
    if (pretty && !items.empty()) *out += base_pad;
    *out += "]";
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.attributes().entries) entries.push_back(&e);
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
    ToJsonImpl(entries[i]->second, opts, depth + 1, undefined_to_null, out);
  }
  if (pretty && !entries.empty()) *out += base_pad;
  *out += "}";
}

bool IsContainer(const Value& v) { return v.Identity() != nullptr; }

}  // namespace

std::string ToJson(const Value& v, const JsonOptions& opts, bool undefined_to_null) {
  std::string out;
  ToJsonImpl(v, opts, 0, undefined_to_null, &out);
  return out;
}

bool StrictEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNull: return true;
    case Value::Kind::kBool: return a.bool_value() == b.bool_value();
    case Value::Kind::kString: return a.str() == b.str();
    default: return a.Identity() == b.Identity();
  }
}

bool LooseEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  const bool a_nullish = a.is_undefined() || a.is_null();
  const bool b_nullish = b.is_undefined() || b.is_null();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (a.kind() == Value::Kind::kBool) return LooseEquals(Value::Int(a.bool_value()), b);
  if (b.kind() == Value::Kind::kBool) return LooseEquals(a, Value::Int(b.bool_value()));
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_number() && b.is_string()) return a.number() == JsStringToNumber(b.str());
  if (a.is_string() && b.is_number()) return JsStringToNumber(a.str()) == b.number();
  if (IsContainer(a) && IsContainer(b)) return a.Identity() == b.Identity();
  // One container, one primitive: the container becomes its string form.
  if (a.kind() == Value::Kind::kFunction || b.kind() == Value::Kind::kFunction) return false;
  if (IsContainer(a)) return LooseEquals(Value::String(ConcatString(a)), b);
  return LooseEquals(a, Value::String(ConcatString(b)));
}

}  // namespace specd::jinja
