// Python str() and repr() of template values: what `{{ value }}`, `~`,
// `|string`, `|join` and str-based filters produce under jinja2.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace specd::jinja {

// str(v): strings as they are, undefined as "", everything else its repr
// (None, True, 1.0, [1, 'a'], {'k': None}, (1,)).
std::string PyStr(const Value& v);
// repr(v): strings quoted and escaped as Python does.
std::string PyRepr(const Value& v);
// repr(float): shortest round-trip digits, ".0" on integral values,
// exponent form below 1e-4 and from 1e16 (1e-05, 1e+16), inf, -inf, nan.
std::string PyFloatRepr(double d);
// repr(str): single quotes unless the text has ' and no ", backslash
// escapes for the quote, \\, \n, \r, \t and non-printable code points.
std::string PyStringRepr(std::string_view s);

}  // namespace specd::jinja
