// String helpers with JavaScript semantics on UTF-8 text, as the chat
// template reference (@huggingface/jinja, running on JS strings) defines
// them: whitespace is JS `\s`, case mapping is Unicode simple case mapping.
//
// Known difference: JS strings are UTF-16, so length counts UTF-16 units
// (done here too), but indexing and slicing here count code points, which
// differs from the reference only for characters outside the BMP.
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
// Length in UTF-16 code units (JS `s.length`).
int64_t Utf16Length(std::string_view s);

// JS `\s`: ASCII whitespace plus NBSP, U+1680, U+2000..U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000, U+FEFF.
bool IsJsSpace(char32_t cp);
// Byte length of the JS whitespace character starting at s[i], 0 if none.
size_t JsSpaceAt(std::string_view s, size_t i);

std::string TrimStart(std::string_view s);
std::string TrimEnd(std::string_view s);
std::string Trim(std::string_view s);

std::string ToUpper(std::string_view s);
std::string ToLower(std::string_view s);
// /\b\w/g uppercased (ASCII word characters); the rest is unchanged.
std::string TitleCase(std::string_view s);
// First character uppercased, the rest unchanged.
std::string Capitalize(std::string_view s);

// Python str.replace(old, new, count) with the reference's empty-`old` rule
// (inserts `new` at every code point boundary). count < 0: all.
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// Python str.split(sep, maxsplit); sep == nullptr splits on whitespace runs.
std::vector<std::string> Split(std::string_view s, const std::string* sep, int64_t maxsplit);

// JS parseInt(s, 10) / parseFloat(s); false when NaN.
bool JsParseInt(std::string_view s, int64_t* out);
bool JsParseFloat(std::string_view s, double* out);
// JS ToNumber(string) as used by `==` between a string and a number (NaN when
// the whole string is not a number).
double JsStringToNumber(std::string_view s);

}  // namespace specd::jinja
