#include "tokenizer/jinja_strings.h"

#include <utf8proc.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace specd::jinja {

char32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), k = *i;
  unsigned char c = p[k];
  if (c < 0x80) {
    *i = k + 1;
    return c;
  }
  int len = (c >= 0xF0 && c <= 0xF4) ? 4 : (c >= 0xE0) ? 3 : (c >= 0xC2 && c < 0xE0) ? 2 : 0;
  if (len == 0 || k + len > n) {
    *i = k + 1;
    return 0xFFFD;
  }
  char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (int j = 1; j < len; ++j) {
    unsigned char cc = p[k + j];
    if ((cc & 0xC0) != 0x80) {
      *i = k + 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    *i = k + 1;
    return 0xFFFD;
  }
  *i = k + len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0x10FFFF) {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    AppendUtf8(0xFFFD, out);
  }
}

std::vector<std::string> SplitCodePoints(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t cp = NextCodePoint(s, &i);
    if (cp == 0xFFFD && i == start + 1 && static_cast<unsigned char>(s[start]) >= 0x80) {
      out.emplace_back("\xEF\xBF\xBD");
    } else {
      out.emplace_back(s.substr(start, i - start));
    }
  }
  return out;
}

int64_t Utf16Length(std::string_view s) {
  int64_t n = 0;
  size_t i = 0;
  while (i < s.size()) n += NextCodePoint(s, &i) >= 0x10000 ? 2 : 1;
  return n;
}

bool IsJsSpace(char32_t c) {
  if (c <= 32) return c == 32 || (c >= 9 && c <= 13);
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

size_t JsSpaceAt(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t j = i;
  char32_t cp = NextCodePoint(s, &j);
  return IsJsSpace(cp) ? j - i : 0;
}

std::string TrimStart(std::string_view s) {
  size_t i = 0;
  while (size_t n = JsSpaceAt(s, i)) i += n;
  return std::string(s.substr(i));
}

std::string TrimEnd(std::string_view s) {
  // Walk forward remembering where the trailing whitespace run starts, since
  // UTF-8 cannot be decoded backwards without care.
  size_t i = 0, end = 0;
  while (i < s.size()) {
    char32_t cp = NextCodePoint(s, &i);
    if (!IsJsSpace(cp)) end = i;
  }
  return std::string(s.substr(0, end));
}

std::string Trim(std::string_view s) { return TrimEnd(TrimStart(s)); }

namespace {

template <typename F>
std::string MapCodePoints(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t cp = NextCodePoint(s, &i);
    if (cp == 0xFFFD && i == start + 1 && static_cast<unsigned char>(s[start]) >= 0x80) {
      out.append("\xEF\xBF\xBD");
      continue;
    }
    AppendUtf8(f(cp), &out);
  }
  return out;
}

bool IsAsciiWord(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string ToUpper(std::string_view s) {
  return MapCodePoints(s, [](char32_t c) {
    return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
  });
}

std::string ToLower(std::string_view s) {
  return MapCodePoints(s, [](char32_t c) {
    return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  });
}

std::string TitleCase(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    bool boundary = i == 0 || !IsAsciiWord(out[i - 1]);
    if (boundary && out[i] >= 'a' && out[i] <= 'z') out[i] = static_cast<char>(out[i] - 32);
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t i = 0;
  NextCodePoint(s, &i);
  return ToUpper(s.substr(0, i)) + std::string(s.substr(i));
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  if (count == 0) return std::string(s);
  int64_t remaining = count < 0 ? std::numeric_limits<int64_t>::max() : count;
  std::string out;
  if (from.empty()) {
    size_t i = 0;
    while (true) {
      if (remaining > 0) {
        out.append(to);
        --remaining;
      }
      if (i >= s.size()) break;
      size_t start = i;
      NextCodePoint(s, &i);
      out.append(s.substr(start, i - start));
    }
    return out;
  }
  size_t pos = 0;
  while (remaining > 0) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    --remaining;
  }
  out.append(s.substr(pos));
  return out;
}

std::vector<std::string> Split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep == nullptr) {
    std::string text = TrimStart(s);
    std::string_view t(text);
    size_t i = 0;
    while (i < t.size()) {
      size_t start = i;
      while (i < t.size() && JsSpaceAt(t, i) == 0) NextCodePoint(t, &i);
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(t.substr(start));
        return out;
      }
      out.emplace_back(t.substr(start, i - start));
      while (size_t n = JsSpaceAt(t, i)) i += n;
    }
    return out;
  }
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(*sep, pos);
    if (hit == std::string_view::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) {
      out.emplace_back(s.substr(pos));
      return out;
    }
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->size();
  }
}

namespace {

// Length of the longest prefix of s that is a JS StrDecimalLiteral without
// sign handling ("Infinity", digits with optional fraction and exponent).
size_t DecimalPrefix(std::string_view s) {
  if (s.substr(0, 8) == "Infinity") return 8;
  size_t i = 0, digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1, frac = 0;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j, ++frac;
    if (digits + frac > 0) {
      i = j;
      digits += frac;
    }
  }
  if (digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t k = j;
    while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
    if (k > j) i = k;
  }
  return i;
}

double ParseDecimal(std::string_view lit) {
  if (lit == "Infinity") return std::numeric_limits<double>::infinity();
  std::string tmp(lit);
  return std::strtod(tmp.c_str(), nullptr);
}

}  // namespace

bool JsParseInt(std::string_view s, int64_t* out) {
  std::string t = TrimStart(s);
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  size_t start = i;
  int64_t v = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    if (v < std::numeric_limits<int64_t>::max() / 10) v = v * 10 + (t[i] - '0');
    ++i;
  }
  if (i == start) return false;
  *out = neg ? -v : v;
  return true;
}

bool JsParseFloat(std::string_view s, double* out) {
  std::string t = TrimStart(s);
  std::string_view v(t);
  bool neg = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  size_t n = DecimalPrefix(v);
  if (n == 0) return false;
  double d = ParseDecimal(v.substr(0, n));
  *out = neg ? -d : d;
  return true;
}

double JsStringToNumber(std::string_view s) {
  std::string t = Trim(s);
  if (t.empty()) return 0;
  std::string_view v(t);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X' || v[1] == 'o' || v[1] == 'O' ||
                                      v[1] == 'b' || v[1] == 'B')) {
    int base = (v[1] == 'x' || v[1] == 'X') ? 16 : (v[1] == 'o' || v[1] == 'O') ? 8 : 2;
    double r = 0;
    for (char c : v.substr(2)) {
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
      if (d >= base) return nan;
      r = r * base + d;
    }
    return r;
  }
  bool neg = false;
  if (v[0] == '+' || v[0] == '-') {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  size_t n = DecimalPrefix(v);
  if (n == 0 || n != v.size()) return nan;
  double d = ParseDecimal(v);
  return neg ? -d : d;
}

}  // namespace specd::jinja
