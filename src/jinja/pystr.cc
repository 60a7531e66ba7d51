#include "jinja/pystr.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/strings.h"

namespace specd::jinja {
namespace {

// Python's str.isprintable() for one code point: not in categories Cc, Cf,
// Cs, Co, Cn, Zl, Zp, Zs, except the ASCII space.
bool IsPrintable(char32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

void ReprImpl(const Value& v, int depth, std::string* out) {
  if (depth > 512) Fail("value nested too deeply to print");
  switch (v.kind()) {
    case Value::Kind::kUndefined: *out += "Undefined"; return;
    case Value::Kind::kNull: *out += "None"; return;
    case Value::Kind::kBool: *out += v.bool_value() ? "True" : "False"; return;
    case Value::Kind::kInt: *out += std::to_string(v.int_value()); return;
    case Value::Kind::kFloat: *out += PyFloatRepr(v.float_value()); return;
    case Value::Kind::kString: *out += PyStringRepr(v.str()); return;
    case Value::Kind::kFunction: *out += "<function " + v.function().name + ">"; return;
    case Value::Kind::kArray: {
      const Array& items = v.array();
      *out += v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += ", ";
        ReprImpl(items[i], depth + 1, out);
      }
      if (v.is_tuple() && items.size() == 1) *out += ",";
      *out += v.is_tuple() ? ")" : "]";
      return;
    }
    case Value::Kind::kObject:
    case Value::Kind::kNamespace: {
      const bool ns = v.kind() == Value::Kind::kNamespace;
      if (ns) *out += "<Namespace ";
      *out += "{";
      bool first = true;
      for (const auto& [k, item] : v.attributes().entries) {
        if (!first) *out += ", ";
        first = false;
        *out += PyStringRepr(k);
        *out += ": ";
        ReprImpl(item, depth + 1, out);
      }
      *out += "}";
      if (ns) *out += ">";
      return;
    }
  }
}

}  // namespace

std::string PyStr(const Value& v) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) return {};
  return PyRepr(v);
}

std::string PyRepr(const Value& v) {
  std::string out;
  ReprImpl(v, 0, &out);
  return out;
}

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]XX, shortest round trip
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int k = static_cast<int>(digits.size());
  const int decpt = exp10 + 1;  // value = 0.digits * 10^decpt
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= k) {
      out += digits + std::string(decpt - k, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (k > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + exp_buf;
}

std::string PyStringRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t cp = NextCodePoint(s, &i);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!IsPrintable(cp)) {
      char buf[16];
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += quote;
  return out;
}

}  // namespace specd::jinja
