#include "jinja/strings.h"

#include <utf8proc.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

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

int64_t CodePointLength(std::string_view s) {
  int64_t n = 0;
  size_t i = 0;
  while (i < s.size()) {
    NextCodePoint(s, &i);
    ++n;
  }
  return n;
}

bool IsPySpace(char32_t c) {
  if (c <= 32) return c == 32 || (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t SpaceAt(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t j = i;
  char32_t cp = NextCodePoint(s, &j);
  return IsPySpace(cp) ? j - i : 0;
}

std::string Strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars != nullptr) {
    size_t k = 0;
    while (k < chars->size()) set.push_back(NextCodePoint(*chars, &k));
  }
  auto strippable = [&](char32_t cp) {
    if (chars == nullptr) return IsPySpace(cp);
    for (char32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  };
  // Walk forward: UTF-8 cannot be decoded backwards without care.
  size_t i = 0, begin = s.size(), end = 0;
  bool seen = false;
  while (i < s.size()) {
    size_t start = i;
    char32_t cp = NextCodePoint(s, &i);
    if (!strippable(cp)) {
      if (!seen) begin = start;
      seen = true;
      end = i;
    }
  }
  if (!seen) return std::string();
  return std::string(s.substr(left ? begin : 0, (right ? end : s.size()) - (left ? begin : 0)));
}

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

char32_t Upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t Lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t Title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }
bool IsCased(char32_t c) { return Upper(c) != c || Lower(c) != c || Title(c) != c; }
bool IsLowerCp(char32_t c) { return Upper(c) != c && Lower(c) == c; }
bool IsUpperCp(char32_t c) { return Lower(c) != c && Upper(c) == c; }

bool IsTitleSeparator(char32_t c) {
  return IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
}

}  // namespace

std::string ToUpper(std::string_view s) { return MapCodePoints(s, Upper); }
std::string ToLower(std::string_view s) { return MapCodePoints(s, Lower); }

std::string PyTitle(std::string_view s) {
  bool prev_cased = false;
  return MapCodePoints(s, [&](char32_t c) {
    char32_t r = prev_cased ? Lower(c) : Title(c);
    prev_cased = IsCased(c);
    return r;
  });
}

std::string PyCapitalize(std::string_view s) {
  bool first = true;
  return MapCodePoints(s, [&](char32_t c) {
    char32_t r = first ? Title(c) : Lower(c);
    first = false;
    return r;
  });
}

std::string JinjaTitle(std::string_view s) {
  bool word_start = true;
  return MapCodePoints(s, [&](char32_t c) {
    if (IsTitleSeparator(c)) {
      word_start = true;
      return c;
    }
    char32_t r = word_start ? Upper(c) : Lower(c);
    word_start = false;
    return r;
  });
}

bool PyIsLower(std::string_view s) {
  bool cased = false;
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = NextCodePoint(s, &i);
    if (IsUpperCp(c) || (IsCased(c) && Title(c) == c && Lower(c) != c)) return false;
    if (IsLowerCp(c)) cased = true;
  }
  return cased;
}

bool PyIsUpper(std::string_view s) {
  bool cased = false;
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = NextCodePoint(s, &i);
    if (IsLowerCp(c) || (IsCased(c) && Title(c) == c && Upper(c) != c)) return false;
    if (IsUpperCp(c)) cased = true;
  }
  return cased;
}

std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0, line_start = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = NextCodePoint(s, &i);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    out.emplace_back(s.substr(line_start, start - line_start));
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    line_start = i;
  }
  if (line_start < s.size()) out.emplace_back(s.substr(line_start));
  return out;
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
    std::string text = Strip(s, nullptr, true, false);
    std::string_view t(text);
    size_t i = 0;
    while (i < t.size()) {
      size_t start = i;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(t.substr(start));
        return out;
      }
      while (i < t.size() && SpaceAt(t, i) == 0) NextCodePoint(t, &i);
      out.emplace_back(t.substr(start, i - start));
      while (size_t n = SpaceAt(t, i)) i += n;
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

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Removes Python's digit-grouping underscores from a run of digits; false
// when an underscore is not between two digits.
bool DropUnderscores(std::string_view s, std::string* out) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !IsDigit(s[i - 1]) || !IsDigit(s[i + 1])) return false;
      continue;
    }
    out->push_back(s[i]);
  }
  return true;
}

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

bool PyParseInt(std::string_view s, int64_t* out) {
  std::string t = Strip(s, nullptr, true, true);
  std::string_view v(t);
  bool neg = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  std::string digits;
  if (v.empty() || !DropUnderscores(v, &digits) || digits.empty()) return false;
  uint64_t acc = 0;
  for (char c : digits) {
    if (!IsDigit(c)) return false;
    if (acc > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
    acc = acc * 10 + static_cast<uint64_t>(c - '0');
  }
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (neg ? 1 : 0);
  if (acc > limit) return false;
  *out = neg ? static_cast<int64_t>(0 - acc) : static_cast<int64_t>(acc);
  return true;
}

bool PyParseFloat(std::string_view s, double* out) {
  std::string t = Strip(s, nullptr, true, true);
  std::string_view v(t);
  bool neg = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  const std::string word = LowerAscii(v);
  double d;
  if (word == "inf" || word == "infinity") {
    d = std::numeric_limits<double>::infinity();
  } else if (word == "nan") {
    d = std::numeric_limits<double>::quiet_NaN();
  } else {
    // digits [. digits] [e [sign] digits], at least one mantissa digit.
    size_t i = 0;
    auto run = [&](std::string* into) {
      size_t start = i;
      while (i < v.size() && (IsDigit(v[i]) || v[i] == '_')) ++i;
      return DropUnderscores(v.substr(start, i - start), into);
    };
    std::string lit, int_part, frac_part, exp_part;
    if (!run(&int_part)) return false;
    if (i < v.size() && v[i] == '.') {
      ++i;
      if (!run(&frac_part)) return false;
    }
    if (int_part.empty() && frac_part.empty()) return false;
    lit = int_part + "." + frac_part;
    if (i < v.size() && (v[i] == 'e' || v[i] == 'E')) {
      ++i;
      std::string sign;
      if (i < v.size() && (v[i] == '+' || v[i] == '-')) sign = v[i++];
      if (!run(&exp_part) || exp_part.empty()) return false;
      lit += "e" + sign + exp_part;
    }
    if (i != v.size()) return false;
    d = std::strtod(lit.c_str(), nullptr);
  }
  *out = neg ? -d : d;
  return true;
}

}  // namespace specd::jinja
