// Filters, tests, methods, attribute access and global functions of the
// chat-template Jinja subset, with jinja2's semantics (see value.h).
// Filters that jinja2 gives generators (select, map, unique, reverse,
// items, ...) return lists here: the same items, though printing such a
// value directly differs (jinja2 prints "<generator object ...>").
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace specd::jinja {

bool IsKnownFilter(std::string_view name);
// Tests usable after `is`.
bool IsKnownTest(std::string_view name);
// Tests usable by name in select/reject/selectattr/rejectattr (adds eq/equalto).
bool IsKnownSelectTest(std::string_view name);
bool IsKnownMethod(std::string_view name);
// namespace, range, raise_exception, strftime_now.
bool IsKnownGlobalFunction(std::string_view name);

// operand | name(args). Throws JinjaError at `pos`. (filters.cc)
Value ApplyFilter(const Value& operand, std::string_view name, CallArgs& args, SourcePos pos);
// `value is name` (arg: the second operand of equalto in select filters).
bool ApplyTest(std::string_view name, const Value& value, const Value* arg, SourcePos pos);
// obj.name: a method of the type (str.upper, dict.get, ...) first, then the
// data (dict key, namespace attribute); undefined if absent. Fails on an
// undefined obj.
Value GetAttr(const Value& object, const std::string& name, SourcePos pos);
// obj[key]: the data first (list/str index, dict key), then as GetAttr for a
// string key; undefined if absent. Fails on an undefined obj.
Value GetItem(const Value& object, const Value& key, SourcePos pos);
// obj[start:stop:step] on a list, tuple or string (none or undefined
// bounds are omitted ones).
Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step,
            SourcePos pos);
// The items Python's iter() gives: a list's items, a string's characters, a
// dict's keys; nothing for undefined; fails for anything else.
Array Iterate(const Value& v, SourcePos pos);

// Global functions (range, namespace, raise_exception, strftime_now) as
// values to place in the top-level scope.
Object GlobalFunctions();

}  // namespace specd::jinja
