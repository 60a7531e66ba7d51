#include "jinja/parser.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "jinja/builtins.h"
#include "jinja/lexer.h"

namespace specd::jinja {
namespace {

// Deeper nesting than this is rejected instead of risking the stack.
constexpr int kMaxDepth = 200;

using T = TokenType;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program Run() {
    Program program;
    while (cur_ < tokens_.size()) program.body.push_back(ParseAny());
    return program;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > kMaxDepth) Fail("template nested too deeply", p->Pos());
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  SourcePos Pos() const {
    if (cur_ < tokens_.size()) return tokens_[cur_].pos;
    return tokens_.empty() ? SourcePos{1, 1} : tokens_.back().pos;
  }
  const Token& Peek() const {
    if (cur_ >= tokens_.size()) Fail("unexpected end of template", Pos());
    return tokens_[cur_];
  }
  bool Is(T type, size_t ahead = 0) const {
    return cur_ + ahead < tokens_.size() && tokens_[cur_ + ahead].type == type;
  }
  bool IsIdent(std::string_view name, size_t ahead = 0) const {
    return Is(T::kIdentifier, ahead) && tokens_[cur_ + ahead].value == name;
  }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!Is(T::kOpenStatement) || !Is(T::kIdentifier, 1)) return false;
    for (auto n : names) {
      if (tokens_[cur_ + 1].value == n) return true;
    }
    return false;
  }
  const Token& Expect(T type, std::string_view what) {
    const Token& t = Peek();
    if (t.type != type) {
      Fail("expected " + std::string(what) + ", found " + Describe(t), t.pos);
    }
    ++cur_;
    return t;
  }
  void ExpectIdent(std::string_view name) {
    if (!IsIdent(name)) Fail("expected '" + std::string(name) + "', found " + Describe(Peek()), Pos());
    ++cur_;
  }
  static std::string Describe(const Token& t) {
    if (t.type == T::kText) return "text";
    return std::string(TokenTypeName(t.type)) + " '" + t.value + "'";
  }
  // Body statements until one of `names` opens a statement.
  std::vector<StmtPtr> ParseBodyUntil(std::initializer_list<std::string_view> names,
                                      std::string_view opener, SourcePos opened_at) {
    std::vector<StmtPtr> body;
    while (!IsStatement(names)) {
      if (cur_ >= tokens_.size()) {
        Fail("unclosed '" + std::string(opener) + "' (expected {% " + std::string(*names.begin()) +
                 " %})",
             opened_at);
      }
      body.push_back(ParseAny());
    }
    return body;
  }
  void ExpectEnd(std::string_view end_name) {
    Expect(T::kOpenStatement, "'{%'");
    ExpectIdent(end_name);
    Expect(T::kCloseStatement, "'%}'");
  }

  static StmtPtr NewStmt(StmtKind kind, SourcePos pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }
  static ExprPtr NewExpr(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  StmtPtr ParseAny() {
    DepthGuard guard(this);
    const Token& t = Peek();
    switch (t.type) {
      case T::kComment: {
        ++cur_;
        auto s = NewStmt(StmtKind::kComment, t.pos);
        s->text = t.value;
        return s;
      }
      case T::kText: {
        ++cur_;
        auto s = NewStmt(StmtKind::kText, t.pos);
        s->text = t.value;
        return s;
      }
      case T::kOpenStatement: return ParseStatement();
      case T::kOpenExpression: {
        ++cur_;
        auto s = NewStmt(StmtKind::kOutput, t.pos);
        s->expr = ParseExpression();
        Expect(T::kCloseExpression, "'}}'");
        return s;
      }
      default: Fail("unexpected " + Describe(t), t.pos);
    }
  }

  StmtPtr ParseStatement() {
    SourcePos open_pos = Peek().pos;
    ++cur_;  // {%
    const Token& t = Peek();
    if (t.type != T::kIdentifier) Fail("expected a statement name, found " + Describe(t), t.pos);
    const std::string name = t.value;
    SourcePos pos = t.pos;
    ++cur_;
    if (name == "set") return ParseSet(pos);
    if (name == "if") {
      auto s = ParseIf(pos);
      ExpectEnd("endif");
      return s;
    }
    if (name == "for") {
      auto s = ParseFor(pos);
      ExpectEnd("endfor");
      return s;
    }
    if (name == "macro") {
      auto s = NewStmt(StmtKind::kMacro, pos);
      if (!Is(T::kIdentifier)) Fail("expected a macro name", Pos());
      s->name = Peek().value;
      ++cur_;
      s->params = ParseArgs(/*parameters=*/true);
      Expect(T::kCloseStatement, "'%}'");
      s->body = ParseBodyUntil({"endmacro"}, "macro", pos);
      ExpectEnd("endmacro");
      return s;
    }
    if (name == "call") {
      auto s = NewStmt(StmtKind::kCallBlock, pos);
      if (Is(T::kOpenParen)) s->params = ParseArgs(true);
      if (!Is(T::kIdentifier)) Fail("expected a macro name after 'call'", Pos());
      auto callee = NewExpr(ExprKind::kName, Pos());
      callee->name = Peek().value;
      ++cur_;
      auto call = NewExpr(ExprKind::kCall, callee->pos);
      call->args = ParseArgs(false);
      call->a = std::move(callee);
      s->expr = std::move(call);
      Expect(T::kCloseStatement, "'%}'");
      s->body = ParseBodyUntil({"endcall"}, "call", pos);
      ExpectEnd("endcall");
      return s;
    }
    if (name == "filter") {
      auto s = NewStmt(StmtKind::kFilterBlock, pos);
      s->expr = ParseFilterTail(nullptr, Pos());
      Expect(T::kCloseStatement, "'%}'");
      s->body = ParseBodyUntil({"endfilter"}, "filter", pos);
      ExpectEnd("endfilter");
      return s;
    }
    if (name == "break" || name == "continue") {
      Expect(T::kCloseStatement, "'%}'");
      return NewStmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, pos);
    }
    (void)open_pos;
    static const std::set<std::string> kClosers = {"endfor", "endif", "else", "elif", "endmacro",
                                                   "endset", "endcall", "endfilter"};
    if (kClosers.count(name)) Fail("unexpected '{% " + name + " %}'", pos);
    Fail("unsupported statement '" + name + "'", pos);
  }

  StmtPtr ParseSet(SourcePos pos) {
    auto s = NewStmt(StmtKind::kSet, pos);
    s->target = ParseExpressionSequence(false);
    if (Is(T::kEquals)) {
      ++cur_;
      s->expr = ParseExpressionSequence(false);
    } else {
      Expect(T::kCloseStatement, "'=' or '%}'");
      s->body = ParseBodyUntil({"endset"}, "set", pos);
      Expect(T::kOpenStatement, "'{%'");
      ExpectIdent("endset");
    }
    Expect(T::kCloseStatement, "'%}'");
    ExprKind k = s->target->kind;
    if (k != ExprKind::kName && k != ExprKind::kTuple && k != ExprKind::kMember) {
      Fail("cannot assign to this expression", s->target->pos);
    }
    return s;
  }

  StmtPtr ParseIf(SourcePos pos) {
    auto s = NewStmt(StmtKind::kIf, pos);
    s->expr = ParseExpression();
    Expect(T::kCloseStatement, "'%}'");
    s->body = ParseBodyUntil({"elif", "else", "endif"}, "if", pos);
    if (IsStatement({"elif"})) {
      cur_ += 2;
      SourcePos elif_pos = tokens_[cur_ - 1].pos;
      s->alt.push_back(ParseIf(elif_pos));
    } else if (IsStatement({"else"})) {
      cur_ += 2;
      Expect(T::kCloseStatement, "'%}'");
      s->alt = ParseBodyUntil({"endif"}, "if", pos);
    }
    return s;
  }

  StmtPtr ParseFor(SourcePos pos) {
    auto s = NewStmt(StmtKind::kFor, pos);
    s->target = ParseExpressionSequence(true);
    if (s->target->kind != ExprKind::kName && s->target->kind != ExprKind::kTuple) {
      Fail("expected a name or tuple as the loop variable", s->target->pos);
    }
    for (const auto& e : s->target->args) {
      if (e->kind != ExprKind::kName) Fail("loop variables must be names", e->pos);
    }
    if (!IsIdent("in")) Fail("expected 'in' after the loop variable", Pos());
    ++cur_;
    s->expr = ParseExpression();
    Expect(T::kCloseStatement, "'%}'");
    s->body = ParseBodyUntil({"endfor", "else"}, "for", pos);
    if (IsStatement({"else"})) {
      cur_ += 2;
      Expect(T::kCloseStatement, "'%}'");
      s->alt = ParseBodyUntil({"endfor"}, "for", pos);
    }
    return s;
  }

  ExprPtr ParseExpressionSequence(bool primary) {
    SourcePos pos = Pos();
    ExprPtr first = primary ? ParsePrimary() : ParseExpression();
    if (!Is(T::kComma)) return first;
    auto tuple = NewExpr(ExprKind::kTuple, pos);
    tuple->args.push_back(std::move(first));
    while (Is(T::kComma)) {
      ++cur_;
      if (Is(T::kCloseParen)) break;  // (x,) and (x, y,): a trailing comma
      tuple->args.push_back(primary ? ParsePrimary() : ParseExpression());
    }
    return tuple;
  }

  ExprPtr ParseExpression() {
    DepthGuard guard(this);
    SourcePos pos = Pos();
    ExprPtr a = ParseOr();
    if (!IsIdent("if")) return a;
    ++cur_;
    ExprPtr test = ParseOr();
    if (IsIdent("else")) {
      ++cur_;
      auto t = NewExpr(ExprKind::kTernary, pos);
      t->a = std::move(test);
      t->b = std::move(a);
      t->c = ParseExpression();
      return t;
    }
    auto sel = NewExpr(ExprKind::kSelect, pos);
    sel->a = std::move(a);
    sel->b = std::move(test);
    return sel;
  }

  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, SourcePos pos) {
    auto e = NewExpr(ExprKind::kBinary, pos);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsIdent("or")) {
      SourcePos pos = Pos();
      ++cur_;
      left = Binary("or", std::move(left), ParseAnd(), pos);
    }
    return left;
  }
  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsIdent("and")) {
      SourcePos pos = Pos();
      ++cur_;
      left = Binary("and", std::move(left), ParseNot(), pos);
    }
    return left;
  }
  ExprPtr ParseNot() {
    if (IsIdent("not")) {
      DepthGuard guard(this);
      auto e = NewExpr(ExprKind::kUnary, Pos());
      ++cur_;
      e->name = "not";
      e->a = ParseNot();
      return e;
    }
    return ParseComparison();
  }
  ExprPtr ParseComparison() {
    ExprPtr left = ParseAdditive();
    while (true) {
      SourcePos pos = Pos();
      std::string op;
      if (IsIdent("not") && IsIdent("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (IsIdent("in")) {
        op = "in";
        ++cur_;
      } else if (Is(T::kComparison)) {
        op = Peek().value;
        ++cur_;
      } else {
        break;
      }
      left = Binary(op, std::move(left), ParseAdditive(), pos);
    }
    return left;
  }
  // `+`/`-`, then `~` one level tighter (jinja2: `1 + 2 ~ 3` is `1 + (2 ~ 3)`).
  ExprPtr ParseAdditive() {
    ExprPtr left = ParseConcat();
    while (Is(T::kAdditive) && Peek().value != "~") {
      SourcePos pos = Pos();
      std::string op = Peek().value;
      ++cur_;
      left = Binary(op, std::move(left), ParseConcat(), pos);
    }
    return left;
  }
  ExprPtr ParseConcat() {
    ExprPtr left = ParseMultiplicative();
    while (Is(T::kAdditive) && Peek().value == "~") {
      SourcePos pos = Pos();
      ++cur_;
      left = Binary("~", std::move(left), ParseMultiplicative(), pos);
    }
    return left;
  }
  ExprPtr ParseMultiplicative() {
    ExprPtr left = ParsePower();
    while (Is(T::kMultiplicative)) {
      SourcePos pos = Pos();
      std::string op = Peek().value;
      ++cur_;
      left = Binary(op, std::move(left), ParsePower(), pos);
    }
    return left;
  }
  ExprPtr ParsePower() {
    ExprPtr left = ParseTest();
    while (Is(T::kPower)) {
      SourcePos pos = Pos();
      ++cur_;
      left = Binary("**", std::move(left), ParseTest(), pos);
    }
    return left;
  }
  ExprPtr ParseTest() {
    ExprPtr operand = ParseFilter();
    while (IsIdent("is")) {
      SourcePos pos = Pos();
      ++cur_;
      auto e = NewExpr(ExprKind::kTest, pos);
      if (IsIdent("not")) {
        e->negate = true;
        ++cur_;
      }
      if (!Is(T::kIdentifier)) Fail("expected a test name after 'is'", Pos());
      e->name = Peek().value;
      if (!IsKnownTest(e->name)) Fail("unsupported test '" + e->name + "'", Pos());
      ++cur_;
      e->a = std::move(operand);
      operand = std::move(e);
    }
    return operand;
  }
  ExprPtr ParseFilter() {
    ExprPtr operand = ParseUnarySign();
    while (Is(T::kPipe)) {
      SourcePos pos = Pos();
      ++cur_;
      operand = ParseFilterTail(std::move(operand), pos);
    }
    return operand;
  }
  // `name` or `name(args)` after a pipe (or after {% filter %}).
  ExprPtr ParseFilterTail(ExprPtr operand, SourcePos pos) {
    if (!Is(T::kIdentifier)) Fail("expected a filter name", Pos());
    auto e = NewExpr(ExprKind::kFilter, Peek().pos);
    e->name = Peek().value;
    if (!IsKnownFilter(e->name)) Fail("unsupported filter '" + e->name + "'", Peek().pos);
    ++cur_;
    if (Is(T::kOpenParen)) {
      e->has_args = true;
      e->args = ParseArgs(false);
    }
    CheckFilterArgs(*e);
    e->a = std::move(operand);
    (void)pos;
    return e;
  }
  void CheckFilterArgs(const Expr& e) {
    if (e.name == "selectattr" || e.name == "rejectattr" || e.name == "select" || e.name == "reject") {
      size_t test_index = (e.name == "selectattr" || e.name == "rejectattr") ? 1 : 0;
      for (size_t i = 0; i < e.args.size() && i <= test_index; ++i) {
        const Expr& arg = *e.args[i];
        if (arg.kind != ExprKind::kLiteral || !arg.literal.is_string()) {
          Fail("the attribute and test arguments of '" + e.name + "' must be string literals", arg.pos);
        }
      }
      if (e.args.size() > test_index) {
        const std::string& test = e.args[test_index]->literal.str();
        if (!IsKnownSelectTest(test)) Fail("unsupported test '" + test + "'", e.args[test_index]->pos);
      }
    }
  }
  ExprPtr ParseUnarySign() {
    const Token* t = cur_ < tokens_.size() ? &tokens_[cur_] : nullptr;
    if (t && (t->type == T::kUnary || t->type == T::kAdditive) && (t->value == "-" || t->value == "+")) {
      DepthGuard guard(this);
      auto e = NewExpr(ExprKind::kUnary, t->pos);
      e->name = t->value;
      ++cur_;
      e->a = ParseUnarySign();
      return e;
    }
    return ParseCallMember();
  }
  ExprPtr ParseCallMember() {
    ExprPtr member = ParseMember(ParsePrimary());
    if (Is(T::kOpenParen)) return ParseCall(std::move(member));
    return member;
  }
  ExprPtr ParseCall(ExprPtr callee) {
    DepthGuard guard(this);
    CheckCallee(*callee);
    auto call = NewExpr(ExprKind::kCall, callee->pos);
    call->args = ParseArgs(false);
    call->a = std::move(callee);
    ExprPtr e = ParseMember(std::move(call));
    if (Is(T::kOpenParen)) e = ParseCall(std::move(e));
    return e;
  }
  // Calls are limited to known functions, macros and methods.
  void CheckCallee(const Expr& callee) {
    if (callee.kind == ExprKind::kName) {
      if (IsKnownGlobalFunction(callee.name) || callee.name == "caller") return;
      called_names_.push_back({callee.name, callee.pos});
      return;
    }
    if (callee.kind == ExprKind::kMember && callee.b == nullptr) {
      if (!IsKnownMethod(callee.name)) Fail("unsupported method '" + callee.name + "'", callee.pos);
      return;
    }
    Fail("unsupported call expression", callee.pos);
  }

 public:
  // Names called as functions that are neither builtins nor `caller`: each
  // must be a macro defined somewhere in the template.
  std::vector<std::pair<std::string, SourcePos>> called_names_;

 private:
  std::vector<ExprPtr> ParseArgs(bool parameters) {
    Expect(T::kOpenParen, "'('");
    std::vector<ExprPtr> args;
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!Is(T::kCloseParen)) {
      if (cur_ >= tokens_.size()) Fail("unclosed '('", Pos());
      SourcePos pos = Pos();
      bool kw_spread = Is(T::kPower);
      bool spread = Is(T::kMultiplicative) && Peek().value == "*";
      if (parameters && (kw_spread || spread)) Fail("argument unpacking is not allowed in parameters", pos);
      if (kw_spread) {
        ++cur_;
        auto e = NewExpr(ExprKind::kKeywordSpread, pos);
        e->a = ParseExpression();
        args.push_back(std::move(e));
        if (Is(T::kComma)) ++cur_;
        if (!Is(T::kCloseParen)) Fail("'**' must be applied to the final argument", Pos());
        break;
      }
      ExprPtr arg;
      if (spread) {
        if (saw_spread) Fail("only one '*' argument unpacking is allowed", pos);
        saw_spread = true;
        ++cur_;
        arg = NewExpr(ExprKind::kSpread, pos);
        arg->a = ParseExpression();
      } else {
        arg = ParseExpression();
        if (Is(T::kEquals)) {
          ++cur_;
          if (arg->kind != ExprKind::kName) Fail("expected a name before '='", arg->pos);
          auto kw = NewExpr(ExprKind::kKeywordArg, arg->pos);
          kw->name = arg->name;
          kw->a = ParseExpression();
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != ExprKind::kName && arg->kind != ExprKind::kKeywordArg) {
            Fail("expected a parameter name", arg->pos);
          }
          if (!names.insert(arg->name).second) Fail("duplicate parameter name: " + arg->name, arg->pos);
        }
        if (arg->kind == ExprKind::kKeywordArg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          Fail(parameters ? "non-default argument follows default argument"
                          : "positional arguments must come before keyword arguments",
               arg->pos);
        } else if (saw_spread) {
          Fail("positional arguments must not follow '*' argument unpacking", arg->pos);
        }
      }
      args.push_back(std::move(arg));
      if (Is(T::kComma)) ++cur_;
    }
    ++cur_;  // )
    return args;
  }

  ExprPtr ParseMember(ExprPtr object) {
    while (Is(T::kDot) || Is(T::kOpenBracket)) {
      SourcePos pos = Pos();
      bool computed = Is(T::kOpenBracket);
      ++cur_;
      if (computed) {
        object = ParseSubscript(std::move(object), pos);
        Expect(T::kCloseBracket, "']'");
        continue;
      }
      const Token& t = Peek();
      auto e = NewExpr(ExprKind::kMember, t.pos);
      if (t.type == T::kIdentifier) {
        e->name = t.value;
      } else if (t.type == T::kNumber && t.value.find('.') == std::string::npos) {
        auto idx = NewExpr(ExprKind::kLiteral, t.pos);
        idx->literal = Value::Int(std::strtoll(t.value.c_str(), nullptr, 10));
        e->b = std::move(idx);
      } else {
        Fail("expected a name or integer after '.'", t.pos);
      }
      ++cur_;
      e->a = std::move(object);
      object = std::move(e);
    }
    return object;
  }

  // obj[key] or obj[start:stop:step].
  ExprPtr ParseSubscript(ExprPtr object, SourcePos pos) {
    std::vector<ExprPtr> parts;
    bool is_slice = false;
    while (!Is(T::kCloseBracket)) {
      if (cur_ >= tokens_.size()) Fail("unclosed '['", pos);
      if (Is(T::kColon)) {
        parts.push_back(nullptr);
        ++cur_;
        is_slice = true;
      } else {
        parts.push_back(ParseExpression());
        if (Is(T::kColon)) {
          ++cur_;
          is_slice = true;
        }
      }
    }
    if (parts.empty()) Fail("expected an index or slice inside '[]'", pos);
    if (is_slice) {
      if (parts.size() > 3) Fail("a slice has at most 3 parts", pos);
      auto e = NewExpr(ExprKind::kSlice, pos);
      e->a = std::move(object);
      parts.resize(3);
      e->args = std::move(parts);
      return e;
    }
    auto e = NewExpr(ExprKind::kMember, pos);
    e->a = std::move(object);
    e->b = std::move(parts[0]);
    return e;
  }

  ExprPtr ParsePrimary() {
    DepthGuard guard(this);
    const Token& t = Peek();
    ++cur_;
    switch (t.type) {
      case T::kNumber: {
        auto e = NewExpr(ExprKind::kLiteral, t.pos);
        if (t.value.find_first_of(".eE") != std::string::npos) {
          e->literal = Value::Float(std::strtod(t.value.c_str(), nullptr));
        } else {
          errno = 0;
          const long long v = std::strtoll(t.value.c_str(), nullptr, 10);
          if (errno == ERANGE) Fail("unsupported: integer literal beyond 64 bits", t.pos);
          e->literal = Value::Int(v);
        }
        return e;
      }
      case T::kString: {
        auto e = NewExpr(ExprKind::kLiteral, t.pos);
        std::string s = t.value;
        while (Is(T::kString)) s += tokens_[cur_++].value;  // adjacent literals concatenate
        e->literal = Value::String(std::move(s));
        return e;
      }
      case T::kIdentifier: {
        auto e = NewExpr(ExprKind::kName, t.pos);
        e->name = t.value;
        return e;
      }
      case T::kOpenParen: {
        if (Is(T::kCloseParen)) {  // () is the empty tuple
          ++cur_;
          return NewExpr(ExprKind::kTuple, t.pos);
        }
        ExprPtr e = ParseExpressionSequence(false);
        Expect(T::kCloseParen, "')'");
        return e;
      }
      case T::kOpenBracket: {
        auto e = NewExpr(ExprKind::kArray, t.pos);
        while (!Is(T::kCloseBracket)) {
          if (cur_ >= tokens_.size()) Fail("unclosed '['", t.pos);
          e->args.push_back(ParseExpression());
          if (Is(T::kComma)) ++cur_;
        }
        ++cur_;
        return e;
      }
      case T::kOpenCurly: {
        auto e = NewExpr(ExprKind::kObject, t.pos);
        while (!Is(T::kCloseCurly)) {
          if (cur_ >= tokens_.size()) Fail("unclosed '{'", t.pos);
          e->args.push_back(ParseExpression());
          Expect(T::kColon, "':' in a dict literal");
          e->args.push_back(ParseExpression());
          if (Is(T::kComma)) ++cur_;
        }
        ++cur_;
        return e;
      }
      default: Fail("unexpected " + Describe(t), t.pos);
    }
  }

  std::vector<Token> tokens_;
  size_t cur_ = 0;
  int depth_ = 0;
};

void CollectMacros(const std::vector<StmtPtr>& body, std::set<std::string>* names) {
  for (const auto& s : body) {
    if (s->kind == StmtKind::kMacro) names->insert(s->name);
    CollectMacros(s->body, names);
    CollectMacros(s->alt, names);
  }
}

}  // namespace

Program ParseTemplate(std::string_view source) {
  Parser parser(Tokenize(source));
  Program program = parser.Run();
  std::set<std::string> macros;
  CollectMacros(program.body, &macros);
  for (const auto& [name, pos] : parser.called_names_) {
    if (!macros.count(name)) Fail("unsupported function '" + name + "'", pos);
  }
  return program;
}

}  // namespace specd::jinja
