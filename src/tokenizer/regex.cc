#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace specd::tok {

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern, bool literal) {
  // PCRE2_LITERAL admits no UCP (meaningless for plain text).
  const uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF |
                           (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return InvalidArgumentError(fmt::format("regex '{}': {} at offset {}", pattern,
                                            reinterpret_cast<const char*>(msg), err_offset));
  }
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  re->code_ = code;
  // JIT is an optimisation only: without it (unsupported CPU or build) the
  // interpreter gives the same matches.
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return re;
}

void Regex::FindAll(std::string_view text, const std::function<void(size_t, size_t)>& fn) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  uint32_t flags = 0;
  while (offset < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), offset, flags, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Very long runs can exhaust JIT's default stack; the interpreter
      // uses heap memory instead.
      flags |= PCRE2_NO_JIT;
      rc = pcre2_match(code, subject, text.size(), offset, flags, md, nullptr);
    }
    if (rc < 0) break;  // no further match (or a resource limit: the rest stays unmatched)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (end > start) {
      fn(start, end);
      offset = end;
    } else {
      // An empty match: step over one character so the scan progresses.
      offset = start + Utf8SeqLen(static_cast<uint8_t>(text[start < text.size() ? start : 0]));
    }
  }
  pcre2_match_data_free(md);
}

}  // namespace specd::tok
