// String helpers with Python str semantics on UTF-8 text, as jinja2 (the
// chat template reference) applies them: whitespace is str.isspace(),
// lengths and indices count code points, case mapping is Unicode simple
// case mapping (Python uses full mapping, so 'ß'.upper() is 'SS' there and
// 'ß' here).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specd::jinja {

// Decodes the code point at s[*i] and advances *i; invalid bytes decode as
// U+FFFD and advance by one.
char32_t NextCodePoint(std::string_view s, size_t* i);
void AppendUtf8(char32_t cp, std::string* out);
std::vector<std::string> SplitCodePoints(std::string_view s);
// Number of code points (Python len(str)).
int64_t CodePointLength(std::string_view s);

// Python str.isspace() for one code point: ASCII \t\n\v\f\r, U+001C..U+001F,
// space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
// U+205F, U+3000.
bool IsPySpace(char32_t cp);
// Byte length of the whitespace character starting at s[i], 0 if none.
size_t SpaceAt(std::string_view s, size_t i);

// Python str.strip / lstrip / rstrip. chars == nullptr strips whitespace;
// otherwise any code point of *chars.
std::string Strip(std::string_view s, const std::string* chars, bool left, bool right);
inline std::string TrimEnd(std::string_view s) { return Strip(s, nullptr, false, true); }

std::string ToUpper(std::string_view s);
std::string ToLower(std::string_view s);
// Python str.title(): a cased character after an uncased one is uppercased,
// every other cased character lowercased.
std::string PyTitle(std::string_view s);
// Python str.capitalize(): first character titlecased, the rest lowercased.
std::string PyCapitalize(std::string_view s);
// jinja2's title filter: the first character of each word (words split by
// whitespace and -({[<) uppercased, the rest lowercased.
std::string JinjaTitle(std::string_view s);
// Python str.islower() / isupper(): at least one cased character and none
// of the other case.
bool PyIsLower(std::string_view s);
bool PyIsUpper(std::string_view s);
// Python str.splitlines() (no keepends): splits on \n, \r, \r\n, \v, \f,
// U+001C..U+001E, U+0085, U+2028, U+2029.
std::vector<std::string> SplitLines(std::string_view s);

// Python str.replace(old, new, count); an empty `old` inserts `new` at every
// code point boundary. count < 0: all.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// Python str.split(sep, maxsplit); sep == nullptr splits on whitespace runs.
std::vector<std::string> Split(std::string_view s, const std::string* sep, int64_t maxsplit);

// Python int(s) (base 10: surrounding whitespace, a sign, digits with single
// underscores between them) and float(s) (also inf, infinity, nan in any
// case, exponents); false when Python raises ValueError or the int does not
// fit in 64 bits.
bool PyParseInt(std::string_view s, int64_t* out);
bool PyParseFloat(std::string_view s, double* out);

}  // namespace specd::jinja
