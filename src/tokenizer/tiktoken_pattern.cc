#include "tokenizer/tiktoken_pattern.h"

#include <fmt/format.h>

#include <vector>

#include "tokenizer/regex.h"

namespace specd::tok {

const char kLlama3TiktokenPattern[] =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

const char kKimiK2Pattern[] =
    R"re([\p{Han}]+)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|\p{N}{1,3})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*)re"
    R"re(|\s*[\r\n]+)re"
    R"re(|\s+(?!\S))re"
    R"re(|\s+)re";

namespace {

class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  StatusOr<std::string> Run() {
    std::string out;
    out.reserve(p_.size());
    while (i_ < p_.size()) {
      if (p_[i_] == '\\') {
        RETURN_IF_ERROR(CopyEscape(&out));
      } else if (p_[i_] == '[') {
        RETURN_IF_ERROR(Class(&out));
      } else {
        out.push_back(p_[i_++]);
      }
    }
    return out;
  }

 private:
  // One class operand: the union of plain members (copied as written) and
  // nested classes (already rewritten to one-character expressions).
  struct Operand {
    std::string members;
    std::vector<std::string> nested;
  };

  Status Error(size_t at, std::string_view what) const {
    return InvalidArgumentError(fmt::format("regex '{}': {} at offset {}", p_, what, at));
  }

  // Copies the escape at p_[i_] == '\\': two bytes, or through the closing
  // brace of \p{..} \x{..} and the like, or through \E of \Q..\E.
  Status CopyEscape(std::string* out) {
    const size_t start = i_;
    if (++i_ >= p_.size()) return Error(start, "trailing backslash");
    const char c = p_[i_++];
    if (c == 'Q') {
      const size_t e = p_.find("\\E", i_);
      i_ = e == std::string_view::npos ? p_.size() : e + 2;
    } else if (i_ < p_.size() && p_[i_] == '{' &&
               (c == 'p' || c == 'P' || c == 'x' || c == 'o' || c == 'N' || c == 'u')) {
      const size_t e = p_.find('}', i_);
      if (e == std::string_view::npos) return Error(start, "unterminated escape");
      const std::string_view name = p_.substr(i_ + 1, e - i_ - 1);
      i_ = e + 1;
      if ((c == 'p' || c == 'P') && IsScriptName(name)) {
        out->append(fmt::format("\\{}{{sc:{}}}", c, name));
        return Status::Ok();
      }
    }
    out->append(p_.substr(start, i_ - start));
    return Status::Ok();
  }

  // A bare \p{Name} that PCRE2 also accepts as \p{sc:Name}. No general
  // category or binary property shares a name with a script, so this picks
  // out exactly the script names.
  static bool IsScriptName(std::string_view name) {
    if (name.empty() || name.find_first_of(":=^") != std::string_view::npos) return false;
    return Regex::Compile(fmt::format("\\p{{sc:{}}}", name)).ok();
  }

  static std::string OperandExpr(const Operand& o) {
    std::vector<std::string> alts;
    if (!o.members.empty()) {
      // A leading '^' after "&&" is a literal in Rust's syntax.
      alts.push_back((o.members[0] == '^' ? "[\\" : "[") + o.members + "]");
    }
    alts.insert(alts.end(), o.nested.begin(), o.nested.end());
    if (alts.size() == 1) return alts[0];
    std::string e = "(?:";
    for (size_t k = 0; k < alts.size(); ++k) e += (k ? "|" : "") + alts[k];
    return e + ")";
  }

  // Reads the class at p_[i_] == '[' and appends it, rewritten if it uses
  // set operations.
  Status Class(std::string* out) {
    const size_t open = i_++;
    bool negated = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      negated = true;
      ++i_;
    }
    std::vector<Operand> ops(1);
    bool set_ops = false;
    if (i_ < p_.size() && p_[i_] == ']') ops.back().members.push_back(p_[i_++]);
    for (;;) {
      if (i_ >= p_.size()) return Error(open, "unterminated character class");
      const char c = p_[i_];
      if (c == ']') {
        ++i_;
        break;
      }
      if (c == '\\') {
        RETURN_IF_ERROR(CopyEscape(&ops.back().members));
      } else if (c == '[' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
        const size_t e = p_.find(":]", i_ + 2);
        if (e == std::string_view::npos) return Error(i_, "unterminated POSIX class");
        ops.back().members.append(p_.substr(i_, e + 2 - i_));
        i_ = e + 2;
      } else if (c == '[') {
        std::string nested;
        RETURN_IF_ERROR(Class(&nested));
        ops.back().nested.push_back(std::move(nested));
        set_ops = true;
      } else if (c == '&' && i_ + 1 < p_.size() && p_[i_ + 1] == '&') {
        ops.emplace_back();
        set_ops = true;
        i_ += 2;
      } else {
        ops.back().members.push_back(c);
        ++i_;
      }
    }
    if (!set_ops) {  // as written, but with script names rewritten
      out->append(negated ? "[^" : "[");
      out->append(ops[0].members);
      out->push_back(']');
      return Status::Ok();
    }
    for (const Operand& o : ops) {
      if (o.members.empty() && o.nested.empty())
        return Error(open, "empty operand of '&&' in a class");
    }
    std::string e = OperandExpr(ops[0]);
    if (ops.size() > 1) {
      std::string look;
      for (size_t k = 1; k < ops.size(); ++k) look += "(?=" + OperandExpr(ops[k]) + ")";
      e = "(?:" + look + e + ")";
    }
    if (negated) e = "(?:(?!" + e + ")[\\s\\S])";
    out->append(e);
    return Status::Ok();
  }

  std::string_view p_;
  size_t i_ = 0;
};

}  // namespace

StatusOr<std::string> TranslateClassSetOperations(std::string_view pattern) {
  return Translator(pattern).Run();
}

}  // namespace specd::tok
