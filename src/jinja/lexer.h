// Tokenizer for the chat-template Jinja subset, configured as Hugging Face
// renders chat templates (trim_blocks=True, lstrip_blocks=True), with this
// preprocessing: a single trailing newline is dropped, spaces/tabs before a
// block tag at the start of a line are removed, the newline after a block
// tag is removed, and transformers' `{% generation %}` markers vanish.
//
// Every token carries the line/column of its first character in the
// ORIGINAL source, so errors point at what the author wrote.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace specd::jinja {

enum class TokenType {
  kText,
  kNumber,
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenBracket,
  kCloseBracket,
  kOpenCurly,
  kCloseCurly,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a lone + or - in prefix position
  kComment,
};

const char* TokenTypeName(TokenType t);

struct Token {
  TokenType type;
  std::string value;
  SourcePos pos;
};

// Throws JinjaError (with the position) on a lexical error.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace specd::jinja
