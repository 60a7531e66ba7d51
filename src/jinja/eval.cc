#include "jinja/eval.h"

#include <cmath>
#include <deque>
#include <memory>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace specd::jinja {
namespace {

struct BreakSignal {
  SourcePos pos;
};
struct ContinueSignal {
  SourcePos pos;
};

// The keyword a {% call %} block uses to hand its body to the macro.
constexpr const char* kCallerKeyword = "\x01" "caller";

struct Env {
  Env* parent = nullptr;
  std::unordered_map<std::string, Value> vars;

  const Value* Lookup(const std::string& name) const {
    for (const Env* e = this; e; e = e->parent) {
      auto it = e->vars.find(name);
      if (it != e->vars.end()) return &it->second;
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) { vars[name] = std::move(v); }
};

bool ExprUsesName(const Expr* e, const std::string& name);
bool StmtsUseName(const std::vector<StmtPtr>& body, const std::string& name) {
  for (const auto& s : body) {
    if (ExprUsesName(s->expr.get(), name) || ExprUsesName(s->target.get(), name) ||
        StmtsUseName(s->body, name) || StmtsUseName(s->alt, name)) {
      return true;
    }
    for (const auto& p : s->params) {
      if (ExprUsesName(p->a.get(), name)) return true;
    }
  }
  return false;
}
bool ExprUsesName(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == ExprKind::kName && e->name == name) return true;
  if (ExprUsesName(e->a.get(), name) || ExprUsesName(e->b.get(), name) || ExprUsesName(e->c.get(), name)) {
    return true;
  }
  for (const auto& arg : e->args) {
    if (ExprUsesName(arg.get(), name)) return true;
  }
  return false;
}

class Interpreter {
 public:
  std::string Run(const Program& program, const Object& globals) {
    Env* top = NewEnv(nullptr);
    for (const auto& [k, v] : globals.entries) top->Set(k, v);
    std::string out;
    try {
      RenderBlock(program.body, top, &out);
    } catch (const BreakSignal& b) {
      Fail("'break' outside a loop", b.pos);
    } catch (const ContinueSignal& c) {
      Fail("'continue' outside a loop", c.pos);
    }
    return out;
  }

 private:
  Env* NewEnv(Env* parent) {
    envs_.push_back(std::make_unique<Env>());
    envs_.back()->parent = parent;
    return envs_.back().get();
  }

  void Step(SourcePos pos) {
    if (++steps_ > kMaxSteps) Fail("template exceeded " + std::to_string(kMaxSteps) + " evaluation steps", pos);
  }

  void Append(std::string* out, std::string_view s, SourcePos pos) {
    if (out->size() + s.size() > kMaxOutput) Fail("template output exceeds " + std::to_string(kMaxOutput) + " bytes", pos);
    out->append(s);
  }

  void RenderBlock(const std::vector<StmtPtr>& body, Env* env, std::string* out) {
    for (const auto& s : body) RenderStmt(*s, env, out);
  }

  void RenderStmt(const Stmt& s, Env* env, std::string* out) {
    Step(s.pos);
    switch (s.kind) {
      case StmtKind::kText: Append(out, s.text, s.pos); return;
      case StmtKind::kComment: return;
      case StmtKind::kOutput: {
        Value v = Eval(*s.expr, env);
        if (v.kind() == Value::Kind::kFunction) Fail("cannot print function '" + v.function().name + "'", s.pos);
        Append(out, PyStr(v), s.pos);
        return;
      }
      case StmtKind::kIf:
        RenderBlock(Eval(*s.expr, env).Truthy() ? s.body : s.alt, env, out);
        return;
      case StmtKind::kFor: RenderFor(s, env, out); return;
      case StmtKind::kSet: ExecSet(s, env); return;
      case StmtKind::kMacro: env->Set(s.name, MakeMacro(s, env)); return;
      case StmtKind::kCallBlock: {
        Append(out, PyStr(CallBlock(s, env)), s.pos);
        return;
      }
      case StmtKind::kFilterBlock: {
        std::string body;
        RenderBlock(s.body, env, &body);
        CallArgs args = EvalArgs(s.expr->args, env);
        Value v = ApplyFilter(Value::String(std::move(body)), s.expr->name, args, s.expr->pos);
        Append(out, PyStr(v), s.pos);
        return;
      }
      case StmtKind::kBreak: throw BreakSignal{s.pos};
      case StmtKind::kContinue: throw ContinueSignal{s.pos};
    }
  }

  void Bind(const Expr& target, const Value& v, Env* env) {
    if (target.kind == ExprKind::kName) {
      env->Set(target.name, v);
      return;
    }
    const Array& values = v.array();
    for (size_t j = 0; j < target.args.size(); ++j) env->Set(target.args[j]->name, values[j]);
  }

  static Value LoopObject(size_t i, size_t n, const Array& items) {
    Object loop;
    const auto len = static_cast<int64_t>(n), idx = static_cast<int64_t>(i);
    loop.entries.reserve(9);
    loop.entries.emplace_back("index", Value::Int(idx + 1));
    loop.entries.emplace_back("index0", Value::Int(idx));
    loop.entries.emplace_back("revindex", Value::Int(len - idx));
    loop.entries.emplace_back("revindex0", Value::Int(len - idx - 1));
    loop.entries.emplace_back("first", Value::Bool(i == 0));
    loop.entries.emplace_back("last", Value::Bool(i + 1 == n));
    loop.entries.emplace_back("length", Value::Int(len));
    loop.entries.emplace_back("previtem", i > 0 ? items[i - 1] : Value());
    loop.entries.emplace_back("nextitem", i + 1 < n ? items[i + 1] : Value());
    return Value::MakeObject(std::move(loop));
  }

  void RenderFor(const Stmt& s, Env* env, std::string* out) {
    Env* scope = NewEnv(env);
    const Expr* iter_expr = s.expr.get();
    const Expr* test = nullptr;
    if (iter_expr->kind == ExprKind::kSelect) {
      test = iter_expr->b.get();
      iter_expr = iter_expr->a.get();
    }
    Value iterable = Eval(*iter_expr, scope);
    Array candidates = Iterate(iterable, iter_expr->pos);
    const Expr& target = *s.target;
    Array items;
    if (target.kind == ExprKind::kName && !test) {
      items = std::move(candidates);
    } else {
      Env* test_scope = test ? NewEnv(scope) : nullptr;
      for (Value& cur : candidates) {
        if (target.kind == ExprKind::kTuple) {
          if (!cur.is_array()) Fail(std::string("cannot unpack non-iterable ") + cur.TypeName() + " object", target.pos);
          size_t expected = target.args.size(), actual = cur.array().size();
          if (expected != actual) Fail(std::string("Too ") + (expected > actual ? "few" : "many") + " items to unpack", target.pos);
        }
        if (test) {
          test_scope->vars.clear();
          Bind(target, cur, test_scope);
          if (!Eval(*test, test_scope).Truthy()) continue;
        }
        items.push_back(std::move(cur));
      }
    }
    bool completed_any = false;
    for (size_t i = 0; i < items.size(); ++i) {
      Step(s.pos);
      scope->Set("loop", LoopObject(i, items.size(), items));
      Bind(target, items[i], scope);
      // Output written before a break/continue stays, as jinja2 streams it.
      try {
        RenderBlock(s.body, scope, out);
      } catch (const ContinueSignal&) {
        continue;
      } catch (const BreakSignal&) {
        break;
      }
      completed_any = true;
    }
    if (!completed_any) RenderBlock(s.alt, scope, out);
  }

  void ExecSet(const Stmt& s, Env* env) {
    Value rhs;
    if (s.expr) {
      rhs = Eval(*s.expr, env);
    } else {
      std::string body;
      RenderBlock(s.body, env, &body);
      rhs = Value::String(std::move(body));
    }
    const Expr& target = *s.target;
    switch (target.kind) {
      case ExprKind::kName: env->Set(target.name, std::move(rhs)); return;
      case ExprKind::kTuple: {
        if (!rhs.is_array()) Fail(std::string("cannot unpack non-iterable ") + rhs.TypeName() + " object", s.pos);
        const Array& arr = rhs.array();
        if (arr.size() != target.args.size()) {
          Fail(std::string("Too ") + (target.args.size() > arr.size() ? "few" : "many") + " items to unpack in set", s.pos);
        }
        for (size_t i = 0; i < arr.size(); ++i) {
          if (target.args[i]->kind != ExprKind::kName) Fail("Cannot unpack to non-identifier in set", target.args[i]->pos);
          env->Set(target.args[i]->name, arr[i]);
        }
        return;
      }
      case ExprKind::kMember: {
        Value obj = Eval(*target.a, env);
        if (obj.kind() != Value::Kind::kNamespace) Fail("cannot assign attribute on non-namespace object", target.pos);
        if (target.b) Fail("Cannot assign to member with non-identifier property", target.pos);
        obj.namespace_object().Set(target.name, std::move(rhs));
        return;
      }
      default: Fail("invalid assignment target", target.pos);
    }
  }

  Value MakeMacro(const Stmt& s, Env* def_env) {
    const bool uses_varargs = StmtsUseName(s.body, "varargs");
    const bool uses_kwargs = StmtsUseName(s.body, "kwargs");
    return Value::MakeFunction(s.name, [this, &s, def_env, uses_varargs, uses_kwargs](CallArgs& args) {
      if (++call_depth_ > kMaxCallDepth) Fail("macro calls nested deeper than " + std::to_string(kMaxCallDepth), s.pos);
      struct DepthRestore {
        int* d;
        ~DepthRestore() { --*d; }
      } restore{&call_depth_};
      Env* parent = NewEnv(def_env);
      Value caller;
      std::vector<std::pair<std::string, Value>> keyword;
      for (auto& kv : args.keyword) {
        if (kv.first == kCallerKeyword) {
          caller = kv.second;
        } else {
          keyword.push_back(kv);
        }
      }
      parent->Set("caller", caller);
      Env* scope = NewEnv(parent);
      BindParameters("'" + s.name + "'", s.params, args.positional, keyword, uses_varargs, uses_kwargs, scope, s.pos);
      std::string out;
      RenderBlock(s.body, scope, &out);
      return Value::String(std::move(out));
    });
  }

  void BindParameters(const std::string& display, const std::vector<ExprPtr>& params, const std::vector<Value>& positional,
                      std::vector<std::pair<std::string, Value>> keyword, bool uses_varargs, bool uses_kwargs, Env* scope,
                      SourcePos pos) {
    std::vector<const Expr*> pending;
    for (size_t i = 0; i < params.size(); ++i) {
      const Expr& p = *params[i];
      const std::string& name = p.name;
      bool have = i < positional.size();
      Value v = have ? positional[i] : Value();
      if (!have) {
        for (auto it = keyword.begin(); it != keyword.end(); ++it) {
          if (it->first == name) {
            v = it->second;
            have = true;
            keyword.erase(it);
            break;
          }
        }
      }
      if (!have && p.kind == ExprKind::kKeywordArg) pending.push_back(&p);
      scope->Set(name, v);
    }
    if (uses_kwargs) {
      Object kw;
      for (auto& [k, v] : keyword) kw.Set(k, v);
      scope->Set("kwargs", Value::MakeObject(std::move(kw)));
    } else if (!keyword.empty()) {
      Fail("macro " + display + " takes no keyword argument '" + keyword.front().first + "'", pos);
    }
    if (uses_varargs) {
      Array rest;
      for (size_t i = params.size(); i < positional.size(); ++i) rest.push_back(positional[i]);
      scope->Set("varargs", Value::MakeTuple(std::move(rest)));
    } else if (positional.size() > params.size()) {
      Fail("macro " + display + " takes not more than " + std::to_string(params.size()) + " argument(s)", pos);
    }
    for (const Expr* p : pending) scope->Set(p->name, Eval(*p->a, scope));
  }

  Value CallBlock(const Stmt& s, Env* env) {
    const bool uses_varargs = StmtsUseName(s.body, "varargs");
    const bool uses_kwargs = StmtsUseName(s.body, "kwargs");
    Value caller = Value::MakeFunction("caller", [this, &s, env, uses_varargs, uses_kwargs](CallArgs& args) {
      Env* scope = NewEnv(env);
      BindParameters("None", s.params, args.positional, args.keyword, uses_varargs, uses_kwargs, scope, s.pos);
      std::string out;
      RenderBlock(s.body, scope, &out);
      return Value::String(std::move(out));
    });
    const Expr& call = *s.expr;
    CallArgs args = EvalArgs(call.args, env);
    args.keyword.emplace_back(kCallerKeyword, caller);
    Value fn = Eval(*call.a, env);
    if (fn.is_undefined()) Fail(fn.undefined_message(), call.pos);
    if (fn.kind() != Value::Kind::kFunction) {
      Fail(std::string("Cannot call something that is not a function: got ") + fn.TypeName(), call.pos);
    }
    return fn.function().call(args);
  }

  CallArgs EvalArgs(const std::vector<ExprPtr>& exprs, Env* env) {
    CallArgs args;
    for (const auto& e : exprs) {
      if (e->kind == ExprKind::kSpread) {
        Value v = Eval(*e->a, env);
        if (!v.is_array()) Fail(std::string("Cannot unpack non-iterable type: ") + v.TypeName(), e->pos);
        for (const Value& item : v.array()) args.positional.push_back(item);
      } else if (e->kind != ExprKind::kKeywordArg && e->kind != ExprKind::kKeywordSpread) {
        args.positional.push_back(Eval(*e, env));
      }
    }
    auto add = [&](const std::string& k, Value v, SourcePos pos) {
      if (args.Keyword(k)) Fail("Got multiple values for keyword argument '" + k + "'", pos);
      args.keyword.emplace_back(k, std::move(v));
    };
    for (const auto& e : exprs) {
      if (e->kind == ExprKind::kKeywordArg) {
        add(e->name, Eval(*e->a, env), e->pos);
      } else if (e->kind == ExprKind::kKeywordSpread) {
        Value v = Eval(*e->a, env);
        if (!v.is_object()) Fail(std::string("Argument after ** must be a mapping, not ") + v.TypeName(), e->pos);
        for (const auto& [k, val] : v.object().entries) add(k, val, e->pos);
      }
    }
    return args;
  }

  Value Eval(const Expr& e, Env* env) {
    Step(e.pos);
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: {
        const Value* v = env->Lookup(e.name);
        return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
      }
      case ExprKind::kArray:
      case ExprKind::kTuple: {
        Array items;
        items.reserve(e.args.size());
        for (const auto& a : e.args) items.push_back(Eval(*a, env));
        if (e.kind == ExprKind::kTuple) return Value::MakeTuple(std::move(items));
        return Value::MakeArray(std::move(items));
      }
      case ExprKind::kObject: {
        Object obj;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = Eval(*e.args[i], env);
          if (!k.is_string()) Fail(std::string("unsupported: dict keys other than strings: got ") + k.TypeName(), e.args[i]->pos);
          obj.Set(k.str(), Eval(*e.args[i + 1], env));
        }
        return Value::MakeObject(std::move(obj));
      }
      case ExprKind::kMember: {
        Value obj = Eval(*e.a, env);
        if (e.b) return GetItem(obj, Eval(*e.b, env), e.pos);
        return GetAttr(obj, e.name, e.pos);
      }
      case ExprKind::kSlice: {
        Value obj = Eval(*e.a, env);
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[i]) parts[i] = Eval(*e.args[i], env);
        }
        return Slice(obj, parts[0], parts[1], parts[2], e.pos);
      }
      case ExprKind::kCall: {
        CallArgs args = EvalArgs(e.args, env);
        Value fn = Eval(*e.a, env);
        if (fn.is_undefined()) Fail(fn.undefined_message(), e.pos);
        if (fn.kind() != Value::Kind::kFunction) {
          Fail(std::string("Cannot call something that is not a function: got ") + fn.TypeName(), e.pos);
        }
        try {
          return fn.function().call(args);
        } catch (JinjaError& err) {
          if (err.pos.line == 0) err.pos = e.pos;
          throw;
        }
      }
      case ExprKind::kFilter: {
        Value operand = Eval(*e.a, env);
        CallArgs args = EvalArgs(e.args, env);
        return ApplyFilter(operand, e.name, args, e.pos);
      }
      case ExprKind::kTest: {
        Value operand = Eval(*e.a, env);
        bool r = ApplyTest(e.name, operand, nullptr, e.pos);
        return Value::Bool(e.negate ? !r : r);
      }
      case ExprKind::kUnary: return EvalUnary(e, env);
      case ExprKind::kBinary: return EvalBinary(e, env);
      case ExprKind::kTernary: return Eval(Eval(*e.a, env).Truthy() ? *e.b : *e.c, env);
      case ExprKind::kSelect: return Eval(*e.b, env).Truthy() ? Eval(*e.a, env) : Value();
      case ExprKind::kKeywordArg:
      case ExprKind::kSpread:
      case ExprKind::kKeywordSpread: Fail("argument syntax outside an argument list", e.pos);
    }
    return Value();
  }

  Value EvalUnary(const Expr& e, Env* env) {
    Value v = Eval(*e.a, env);
    if (e.name == "not") return Value::Bool(!v.Truthy());
    return UnaryOp(e.name, v, e.pos);
  }

  Value EvalBinary(const Expr& e, Env* env) {
    const std::string& op = e.name;
    Value left = Eval(*e.a, env);
    if (op == "and") return left.Truthy() ? Eval(*e.b, env) : left;
    if (op == "or") return left.Truthy() ? left : Eval(*e.b, env);
    return BinaryOp(op, left, Eval(*e.b, env), e.pos);
  }

  std::deque<std::unique_ptr<Env>> envs_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace

std::string RenderProgram(const Program& program, const Object& globals) {
  Interpreter interp;
  return interp.Run(program, globals);
}

}  // namespace specd::jinja
