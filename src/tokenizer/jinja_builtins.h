// Filters, tests, methods and global functions of the chat-template Jinja
// subset, with @huggingface/jinja's semantics (see jinja_value.h).
//
// Beyond the reference: `select`/`reject` (used by Llama 3.1's builtin-tool
// branch) and `count` (an alias of `length`) are implemented with Jinja2
// semantics; the reference rejects them at render time.
#pragma once

#include <string_view>

#include "tokenizer/jinja_value.h"

namespace specd::jinja {

bool IsKnownFilter(std::string_view name);
// Tests usable after `is`.
bool IsKnownTest(std::string_view name);
// Tests usable by name in select/reject/selectattr/rejectattr (adds eq/equalto).
bool IsKnownSelectTest(std::string_view name);
bool IsKnownMethod(std::string_view name);
// namespace, range, raise_exception, strftime_now.
bool IsKnownGlobalFunction(std::string_view name);

// operand | name  (has_args: written as name(...), which some filters treat
// differently, as in the reference). Throws JinjaError at `pos`.
Value ApplyFilter(const Value& operand, std::string_view name, bool has_args, CallArgs& args,
                  SourcePos pos);
// `value is name` (arg: the second operand of equalto in select filters).
bool ApplyTest(std::string_view name, const Value& value, const Value* arg, SourcePos pos);
// obj.name / obj[key]: data first, then the type's builtin methods
// (string: upper, split, ...; dict: get, items, ...); undefined if absent.
Value GetMember(const Value& object, const Value& key, SourcePos pos);
// obj[start:stop:step] on a list or string.
Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step,
            SourcePos pos);

// Global functions (range, namespace, raise_exception, strftime_now) as
// values to place in the top-level scope.
Object GlobalFunctions();

}  // namespace specd::jinja
