// Operators of the chat-template Jinja subset with Python semantics, as
// jinja2 evaluates them: `+` adds numbers or concatenates two strings, two
// lists or two tuples (anything else is a TypeError); `*` also repeats a
// string or list; `/` is true division, `//` and `%` floor toward negative
// infinity; `~` concatenates str() of both sides; `in` tests substrings,
// list membership by `==` and dict keys; `<`-style comparisons across
// unrelated types fail. Any operand that is undefined fails (except in `~`,
// where it is "", `==`/`!=`, and on the right of `in`, where it is empty).
// Integer results that overflow 64 bits fail (Python would grow the int).
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace specd::jinja {

// `a op b` for op in + - * / // % ** ~ == != < > <= >= in, "not in".
// Throws JinjaError at `pos`.
Value BinaryOp(std::string_view op, const Value& a, const Value& b, SourcePos pos);
// `-v` / `+v` (`not` is handled by the caller).
Value UnaryOp(std::string_view op, const Value& v, SourcePos pos);
// Python `item in container`.
bool Contains(const Value& container, const Value& item, SourcePos pos);

}  // namespace specd::jinja
