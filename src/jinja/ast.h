// Syntax tree of a parsed chat template. Built once by ParseTemplate and
// then only read (rendering is thread-safe because nothing here mutates).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace specd::jinja {

enum class ExprKind {
  kLiteral,     // literal
  kName,        // name
  kArray,       // [args...]
  kTuple,       // (args...) or a, b
  kObject,      // {args[0]: args[1], ...}
  kMember,      // a.name (b == nullptr) or a[b] / a.<int> (b set)
  kSlice,       // a[args[0]:args[1]:args[2]] (entries may be null)
  kCall,        // a(args...)
  kFilter,      // a | name  or  a | name(args...) when has_args
  kTest,        // a is [not] name
  kUnary,       // name: "not", "-", "+"
  kBinary,      // a name b
  kTernary,     // b if a else c
  kSelect,      // a if b  (no else: undefined when b is false)
  kKeywordArg,  // name=a (only inside argument lists)
  kSpread,      // *a
  kKeywordSpread,  // **a
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  SourcePos pos;
  Value literal;
  std::string name;
  bool negate = false;    // kTest
  bool has_args = false;  // kFilter: written with parentheses
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // if expr: body else alt (an elif is an If alone in alt)
  kFor,          // for target in expr [if filter]: body else alt
  kSet,          // set target = expr, or block set (expr null, body)
  kMacro,        // macro name(params): body
  kCallBlock,    // call(params) expr: body
  kFilterBlock,  // filter expr (a kFilter with a null operand): body
  kBreak,
  kContinue,
  kComment,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  StmtKind kind;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  std::vector<StmtPtr> body, alt;
  std::string name;
  std::vector<ExprPtr> params;  // kName or kKeywordArg (default value)
};

struct Program {
  std::vector<StmtPtr> body;
};

}  // namespace specd::jinja
