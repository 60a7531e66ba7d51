#include "jinja/lexer.h"

#include <algorithm>
#include <cstdint>

#include "jinja/strings.h"

namespace specd::jinja {

const char* TokenTypeName(TokenType t) {
  switch (t) {
    case TokenType::kText: return "Text";
    case TokenType::kNumber: return "NumericLiteral";
    case TokenType::kString: return "StringLiteral";
    case TokenType::kIdentifier: return "Identifier";
    case TokenType::kEquals: return "Equals";
    case TokenType::kOpenParen: return "OpenParen";
    case TokenType::kCloseParen: return "CloseParen";
    case TokenType::kOpenStatement: return "OpenStatement";
    case TokenType::kCloseStatement: return "CloseStatement";
    case TokenType::kOpenExpression: return "OpenExpression";
    case TokenType::kCloseExpression: return "CloseExpression";
    case TokenType::kOpenBracket: return "OpenSquareBracket";
    case TokenType::kCloseBracket: return "CloseSquareBracket";
    case TokenType::kOpenCurly: return "OpenCurlyBracket";
    case TokenType::kCloseCurly: return "CloseCurlyBracket";
    case TokenType::kComma: return "Comma";
    case TokenType::kDot: return "Dot";
    case TokenType::kColon: return "Colon";
    case TokenType::kPipe: return "Pipe";
    case TokenType::kAdditive: return "AdditiveBinaryOperator";
    case TokenType::kMultiplicative: return "MultiplicativeBinaryOperator";
    case TokenType::kPower: return "ExponentiationBinaryOperator";
    case TokenType::kComparison: return "ComparisonBinaryOperator";
    case TokenType::kUnary: return "UnaryOperator";
    case TokenType::kComment: return "Comment";
  }
  return "?";
}

namespace {

// Text after a preprocessing step plus, for every byte, its offset in the
// original source (orig has one extra entry for the end).
struct Mapped {
  std::string text;
  std::vector<uint32_t> orig;

  void Append(const Mapped& from, size_t i) {
    text.push_back(from.text[i]);
    orig.push_back(from.orig[i]);
  }
  void Finish(const Mapped& from) { orig.push_back(from.orig.back()); }
};

bool IsLineStart(const std::string& s, size_t i) {
  if (i == 0) return true;
  char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  // U+2028 / U+2029 also end a line for JS's multiline `^`.
  return i >= 3 && s.compare(i - 3, 2, "\xE2\x80") == 0 &&
         (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
Mapped LstripBlocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  size_t i = 0;
  while (i < s.size()) {
    if (IsLineStart(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j > i && j + 1 < s.size() && s[j] == '{' &&
          (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        i = j;
      }
    }
    out.Append(in, i);
    ++i;
  }
  out.Finish(in);
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1".
Mapped TrimBlocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.text;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' &&
        s[i + 2] == '\n') {
      out.Append(in, i);
      out.Append(in, i + 1);
      i += 3;
      continue;
    }
    out.Append(in, i);
    ++i;
  }
  out.Finish(in);
  return out;
}

size_t SkipSpaces(std::string_view s, size_t i) {
  while (size_t n = SpaceAt(s, i)) i += n;
  return i;
}

// Removes transformers' {% generation %} / {% endgeneration %} markers,
// honouring their `-` modifiers.
Mapped StripGenerationTags(const Mapped& in) {
  Mapped out;
  std::string_view s = in.text;
  size_t i = 0, last_index = 0;
  while (i < s.size()) {
    if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '%') {
      size_t j = i + 2;
      bool lstrip = j < s.size() && s[j] == '-';
      if (lstrip) ++j;
      j = SkipSpaces(s, j);
      if (s.substr(j, 3) == "end" && s.substr(j + 3, 10) == "generation") j += 3;
      if (s.substr(j, 10) == "generation") {
        j = SkipSpaces(s, j + 10);
        bool rstrip = j < s.size() && s[j] == '-';
        if (rstrip) ++j;
        if (s.substr(j, 2) == "%}") {
          j += 2;
          size_t after_end = SkipSpaces(s, j);
          if (lstrip) {
            // Trim whitespace emitted since the previous marker.
            size_t keep = out.text.size();
            size_t floor = keep - (i - last_index);
            std::string_view emitted(out.text);
            std::string trimmed = TrimEnd(emitted.substr(floor));
            keep = floor + trimmed.size();
            out.text.resize(keep);
            out.orig.resize(keep);
          }
          if (!rstrip) {
            for (size_t k = j; k < after_end; ++k) out.Append(in, k);
          }
          i = last_index = after_end;
          continue;
        }
      }
    }
    out.Append(in, i);
    ++i;
  }
  out.Finish(in);
  return out;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWord(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_';
}
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

struct Rule {
  std::string_view seq;
  TokenType type;
};
// Same order as the reference's mapping table: longer operators first.
constexpr Rule kRules[] = {
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenCurly},       {"}", TokenType::kCloseCurly},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
};

class Lexer {
 public:
  Lexer(std::string_view original, const Mapped& m) : src_(m.text), orig_(m.orig), original_(original) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < original.size(); ++i) {
      if (original[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    const size_t n = src_.size();
    while (pos_ < n) {
      const bool have_last = !tokens_.empty();
      const TokenType last = have_last ? tokens_.back().type : TokenType::kText;
      if (!have_last || last == TokenType::kCloseStatement || last == TokenType::kCloseExpression ||
          last == TokenType::kComment) {
        size_t end = pos_;
        while (true) {
          end = src_.find('{', end);
          if (end == std::string_view::npos) {
            end = n;
            break;
          }
          char next = At(end + 1);
          if (next == '%' || next == '{' || next == '#') break;
          ++end;
        }
        if (end > pos_) {
          Push(TokenType::kText, std::string(src_.substr(pos_, end - pos_)), pos_);
          pos_ = end;
          continue;
        }
      }
      if (src_[pos_] == '{') {
        char next = At(pos_ + 1);
        if (next == '#') {
          LexComment();
          continue;
        }
        if (At(pos_ + 2) == '-') {
          if (next == '%') {
            StripTrailingWhitespace();
            Push(TokenType::kOpenStatement, "{%", pos_);
            pos_ += 3;
            continue;
          }
          if (next == '{') {
            StripTrailingWhitespace();
            Push(TokenType::kOpenExpression, "{{", pos_);
            curly_depth_ = 0;
            pos_ += 3;
            continue;
          }
        }
      }
      // Whitespace inside a tag is skipped; running into the end is an error.
      while (size_t w = SpaceAt(src_, pos_)) {
        pos_ += w;
        if (pos_ >= n) Fail("Unexpected end of input", PosAt(n));
      }
      const char ch = src_[pos_];
      if (ch == '-' && At(pos_ + 2) == '}') {
        char next = At(pos_ + 1);
        if (next == '%' || next == '}') {
          Push(next == '%' ? TokenType::kCloseStatement : TokenType::kCloseExpression,
               next == '%' ? "%}" : "}}", pos_);
          pos_ = SkipSpaces(src_, pos_ + 3);
          continue;
        }
      }
      if (ch == '-' || ch == '+') {
        if (!have_last || last == TokenType::kText) {
          Fail(std::string("Unexpected character: ") + ch, PosAt(pos_));
        }
        bool binary = last == TokenType::kIdentifier || last == TokenType::kNumber ||
                      last == TokenType::kString || last == TokenType::kCloseParen ||
                      last == TokenType::kCloseBracket;
        if (!binary) {
          size_t start = pos_++;
          std::string num = ConsumeDigits();
          if (!num.empty() && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
            ++pos_;
            num += "." + ConsumeDigits();
          }
          if (!num.empty()) num += ConsumeExponent();
          if (num.empty()) {
            Push(TokenType::kUnary, std::string(1, ch), start);
          } else {
            Push(TokenType::kNumber, std::string(1, ch) + num, start);
          }
          continue;
        }
      }
      if (MatchRule()) continue;
      if (ch == '\'' || ch == '"') {
        size_t start = pos_++;
        std::string str = ConsumeString(ch);
        Push(TokenType::kString, std::move(str), start);
        ++pos_;
        continue;
      }
      if (IsDigit(ch)) {
        size_t start = pos_;
        std::string num = ConsumeDigits();
        if (last != TokenType::kDot && At(pos_) == '.' && IsDigit(At(pos_ + 1))) {
          ++pos_;
          num += "." + ConsumeDigits();
        }
        if (last != TokenType::kDot) num += ConsumeExponent();
        Push(TokenType::kNumber, std::move(num), start);
        continue;
      }
      if (IsWord(ch)) {
        size_t start = pos_;
        while (IsWord(At(pos_))) {
          if (++pos_ >= n) Fail("Unexpected end of input", PosAt(n));
        }
        Push(TokenType::kIdentifier, std::string(src_.substr(start, pos_ - start)), start);
        continue;
      }
      size_t cp_end = pos_;
      NextCodePoint(src_, &cp_end);
      Fail("Unexpected character: " + std::string(src_.substr(pos_, cp_end - pos_)), PosAt(pos_));
    }
    return std::move(tokens_);
  }

 private:
  char At(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }

  // Columns count characters (UTF-8 lead bytes). Positions are asked for in
  // increasing order, so the count continues from the previous answer when
  // on the same line instead of rescanning long single-line templates.
  SourcePos PosAt(size_t i) {
    size_t off = orig_[std::min(i, orig_.size() - 1)];
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    size_t line_start = *(it - 1);
    size_t from = line_start;
    int col = 1;
    if (cache_line_start_ == line_start && cache_off_ <= off) {
      from = cache_off_;
      col = cache_col_;
    }
    for (size_t k = from; k < off && k < original_.size(); ++k) {
      if ((static_cast<unsigned char>(original_[k]) & 0xC0) != 0x80) ++col;
    }
    cache_line_start_ = line_start;
    cache_off_ = off;
    cache_col_ = col;
    return {static_cast<int>(it - line_starts_.begin()), col};
  }

  void Push(TokenType type, std::string value, size_t at) {
    tokens_.push_back(Token{type, std::move(value), PosAt(at)});
  }

  void StripTrailingWhitespace() {
    if (!tokens_.empty() && tokens_.back().type == TokenType::kText) {
      tokens_.back().value = TrimEnd(tokens_.back().value);
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }

  void LexComment() {
    size_t start = pos_;
    pos_ += 2;
    bool strip_before = At(pos_) == '-';
    if (strip_before) ++pos_;
    size_t end = src_.find("#}", pos_);
    if (end == std::string_view::npos) Fail("Missing end of comment tag", PosAt(start));
    std::string comment(src_.substr(pos_, end - pos_));
    bool strip_after = !comment.empty() && comment.back() == '-';
    if (strip_after) comment.pop_back();
    if (strip_before) StripTrailingWhitespace();
    Push(TokenType::kComment, std::move(comment), start);
    pos_ = end + 2;
    if (strip_after) pos_ = SkipSpaces(src_, pos_);
  }

  // A float literal's exponent ("e16", "E-5"), "" if none follows.
  std::string ConsumeExponent() {
    if (At(pos_) != 'e' && At(pos_) != 'E') return "";
    size_t k = pos_ + 1;
    if (At(k) == '+' || At(k) == '-') ++k;
    if (!IsDigit(At(k))) return "";
    std::string exp(src_.substr(pos_, k - pos_));
    pos_ = k;
    return exp + ConsumeDigits();
  }

  std::string ConsumeDigits() {
    size_t start = pos_;
    while (IsDigit(At(pos_))) {
      if (++pos_ >= src_.size()) Fail("Unexpected end of input", PosAt(pos_));
    }
    return std::string(src_.substr(start, pos_ - start));
  }

  bool MatchRule() {
    for (const Rule& r : kRules) {
      if (r.seq == "}}" && curly_depth_ > 0) continue;
      if (src_.substr(pos_, r.seq.size()) != r.seq) continue;
      Push(r.type, std::string(r.seq), pos_);
      if (r.type == TokenType::kOpenExpression) curly_depth_ = 0;
      if (r.type == TokenType::kOpenCurly) ++curly_depth_;
      if (r.type == TokenType::kCloseCurly) --curly_depth_;
      pos_ += r.seq.size();
      return true;
    }
    return false;
  }

  // Reads a string literal body up to (not including) the closing quote.
  std::string ConsumeString(char quote) {
    std::string out;
    const size_t n = src_.size();
    while (true) {
      if (pos_ >= n) Fail("Unexpected end of input", PosAt(n));
      char c = src_[pos_];
      if (c == quote) break;
      ++pos_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= n) Fail("Unexpected end of input", PosAt(n));
      size_t esc_at = pos_ - 1;
      char e = src_[pos_++];
      if (e == 'x' || e == 'u' || e == 'U') {
        size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::string_view hex = src_.substr(pos_, len);
        if (hex.size() != len || !std::all_of(hex.begin(), hex.end(), IsHex)) {
          Fail("Invalid hexadecimal escape sequence: \\" + std::string(1, e) + std::string(hex),
               PosAt(esc_at));
        }
        char32_t cp = static_cast<char32_t>(std::stoul(std::string(hex), nullptr, 16));
        if (cp > 0x10FFFF) Fail("Invalid \\U escape: " + std::string(hex), PosAt(esc_at));
        pos_ += len;
        // A \uD8xx\uDCxx pair is one character, as in a JS string.
        if (cp >= 0xD800 && cp <= 0xDBFF && src_.substr(pos_, 2) == "\\u") {
          std::string_view lo = src_.substr(pos_ + 2, 4);
          if (lo.size() == 4 && std::all_of(lo.begin(), lo.end(), IsHex)) {
            char32_t low = static_cast<char32_t>(std::stoul(std::string(lo), nullptr, 16));
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
              pos_ += 6;
            }
          }
        }
        AppendUtf8(cp, &out);
        continue;
      }
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        default: Fail(std::string("Unexpected escaped character: ") + e, PosAt(esc_at));
      }
    }
    return out;
  }

  std::string_view src_;
  const std::vector<uint32_t>& orig_;
  std::string_view original_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  size_t cache_line_start_ = static_cast<size_t>(-1), cache_off_ = 0;
  int cache_col_ = 1;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  Mapped m;
  m.text.assign(source);
  m.orig.resize(source.size() + 1);
  for (size_t i = 0; i <= source.size(); ++i) m.orig[i] = static_cast<uint32_t>(i);
  if (!m.text.empty() && m.text.back() == '\n') {
    m.text.pop_back();
    m.orig.erase(m.orig.end() - 2);
  }
  Mapped stripped = StripGenerationTags(TrimBlocks(LstripBlocks(m)));
  Lexer lexer(source, stripped);
  return lexer.Run();
}

}  // namespace specd::jinja
