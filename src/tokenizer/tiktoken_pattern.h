// Pre-tokenizer patterns of tiktoken rank files, and the rewriting that lets
// PCRE2 run them.
//
// tiktoken compiles its pattern with Rust's fancy-regex, whose character
// classes take set operations PCRE2 does not have: intersection
// `[A&&B]` and nested classes `[A[B]]` (union). Kimi-K2's pattern relies on
// the first: `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace specd::tok {

// Meta's Llama 3 pattern (tokenizer.py's pat_str; the same as Llama 3's
// tokenizer.json Split). The default when a tokenizer_config.json names none.
extern const char kLlama3TiktokenPattern[];
// Kimi-K2's pattern (tokenization_kimi.py's pat_str), in Rust regex syntax:
// pass it through TranslateClassSetOperations before compiling.
extern const char kKimiK2Pattern[];

// Rewrites every character class that uses set operations into PCRE2
// syntax, and script names to PCRE2's Script spelling (below); classes without them and everything
// outside classes are copied byte for byte. Each class matches one character, so it becomes one
// character-wide expression:
//   [A&&B&&C]  -> (?:(?=B')(?=C')A')   A' = [A] (or the rewritten nested form)
//   [A[B][C]]  -> (?:[A]|B'|C')         nested classes are a union
//   [^X]       -> (?:(?!X')[\s\S])      when X uses set operations
// so `[\p{L}&&[^\p{Han}]]+` becomes `(?:(?=[^\p{Han}])[\p{L}])+`.
// POSIX classes ([:alpha:]), escapes (\p{..}, \], \x{..}, \Q..\E) and a `]`
// first in a class are literal parts of the class, as in both dialects.
// A bare script name means the Script property in Rust's regex but Script
// Extensions in PCRE2 (10.40 and later: U+3002 "。" is Han there), so
// \p{Han} becomes \p{sc:Han} wherever PCRE2 accepts that spelling.
// Rust's `--` (difference) and `~~` (symmetric difference) are not rewritten.
// InvalidArgument names the offset for an unterminated class or an empty
// operand ("[&&a]").
StatusOr<std::string> TranslateClassSetOperations(std::string_view pattern);

}  // namespace specd::tok
