// A compiled PCRE2 pattern with the semantics tokenizer.json patterns are
// written for (Oniguruma / Rust regex): UTF mode, Unicode properties for \s \w
// \d (UCP), JIT when available. Invalid UTF-8 in the subject never matches
// (PCRE2_MATCH_INVALID_UTF) instead of failing the whole match.
//
// Thread-safe: Compile once, then FindAll from any thread (match data is
// allocated per call).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace specd::tok {

class Regex {
 public:
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // `literal`: match `pattern` as plain text. InvalidArgument names the
  // pattern and PCRE2's message with the offset.
  static StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern, bool literal = false);

  // Calls fn(start, end) for each non-overlapping, non-empty match in `text`,
  // left to right (byte offsets).
  void FindAll(std::string_view text, const std::function<void(size_t, size_t)>& fn) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace specd::tok
