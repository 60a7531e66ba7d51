#include "jinja/ops.h"

#include <cmath>
#include <string>

#include "jinja/pystr.h"

namespace specd::jinja {
namespace {

// A repeated string or list may not exceed this (the same cap as a
// template's whole output).
constexpr size_t kMaxRepeatBytes = 64u << 20;

[[noreturn]] void Unsupported(std::string_view op, const Value& a, const Value& b, SourcePos pos) {
  Fail("unsupported operand type(s) for " + std::string(op) + ": '" + a.TypeName() + "' and '" + b.TypeName() +
           "'",
       pos);
}

[[noreturn]] void Overflow(SourcePos pos) { Fail("integer result does not fit in 64 bits", pos); }

int64_t Add(int64_t x, int64_t y, SourcePos pos) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) Overflow(pos);
  return r;
}
int64_t Sub(int64_t x, int64_t y, SourcePos pos) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) Overflow(pos);
  return r;
}
int64_t Mul(int64_t x, int64_t y, SourcePos pos) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) Overflow(pos);
  return r;
}

// Python's float_divmod: the remainder takes the divisor's sign.
void FloatDivMod(double x, double y, double* floordiv, double* mod) {
  double m = std::fmod(x, y);
  double div = (x - m) / y;
  if (m != 0) {
    if ((y < 0) != (m < 0)) {
      m += y;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, y);
  }
  double fd;
  if (div != 0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, x / y);
  }
  *floordiv = fd;
  *mod = m;
}

Value IntArith(std::string_view op, int64_t x, int64_t y, SourcePos pos) {
  if (op == "+") return Value::Int(Add(x, y, pos));
  if (op == "-") return Value::Int(Sub(x, y, pos));
  if (op == "*") return Value::Int(Mul(x, y, pos));
  if (op == "/" || op == "//" || op == "%") {
    if (y == 0) Fail(op == "/" ? "division by zero" : "integer division or modulo by zero", pos);
  }
  if (op == "/") return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  if (op == "//") {
    if (x == INT64_MIN && y == -1) Overflow(pos);
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;
    return Value::Int(q);
  }
  if (op == "%") {
    if (y == -1) return Value::Int(0);
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::Int(m);
  }
  // "**"
  if (y < 0) {
    if (x == 0) Fail("0.0 cannot be raised to a negative power", pos);
    return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
  }
  int64_t result = 1, base = x;
  for (int64_t e = y; e > 0; e >>= 1) {
    if (e & 1) result = Mul(result, base, pos);
    if (e > 1) base = Mul(base, base, pos);
  }
  return Value::Int(result);
}

Value FloatArith(std::string_view op, double x, double y, SourcePos pos) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if ((op == "/" || op == "//" || op == "%") && y == 0) Fail("float division by zero", pos);
  if (op == "/") return Value::Float(x / y);
  if (op == "//" || op == "%") {
    double fd, m;
    FloatDivMod(x, y, &fd, &m);
    return Value::Float(op == "//" ? fd : m);
  }
  // "**"
  if (x == 0 && y < 0) Fail("0.0 cannot be raised to a negative power", pos);
  if (x < 0 && y != std::trunc(y) && std::isfinite(y)) Fail("a negative number to a fractional power is complex", pos);
  double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) Fail("numerical result out of range", pos);
  return Value::Float(r);
}

Value Repeat(const Value& seq, const Value& count, SourcePos pos) {
  const int64_t n = count.integer();
  if (seq.is_string()) {
    if (n <= 0) return Value::String("");
    if (seq.str().size() * static_cast<uint64_t>(n) > kMaxRepeatBytes) Fail("repeated string too long", pos);
    std::string out;
    out.reserve(seq.str().size() * n);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::String(std::move(out));
  }
  Array out;
  if (n > 0) {
    if (seq.array().size() * static_cast<uint64_t>(n) * sizeof(Value) > kMaxRepeatBytes) {
      Fail("repeated list too long", pos);
    }
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.array().begin(), seq.array().end());
  }
  return seq.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeArray(std::move(out));
}

bool IsIntLike(const Value& v) { return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool; }
bool IsSequence(const Value& v) { return v.is_string() || v.is_array(); }

Value Arith(std::string_view op, const Value& a, const Value& b, SourcePos pos) {
  if (a.is_numeric() && b.is_numeric()) {
    if (IsIntLike(a) && IsIntLike(b)) return IntArith(op, a.integer(), b.integer(), pos);
    return FloatArith(op, a.numeric(), b.numeric(), pos);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::String(a.str() + b.str());
    if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
      Array joined = a.array();
      joined.insert(joined.end(), b.array().begin(), b.array().end());
      return a.is_tuple() ? Value::MakeTuple(std::move(joined)) : Value::MakeArray(std::move(joined));
    }
    if (a.is_string()) Fail(std::string("can only concatenate str (not \"") + b.TypeName() + "\") to str", pos);
  }
  if (op == "*") {
    if (IsSequence(a) && IsIntLike(b)) return Repeat(a, b, pos);
    if (IsIntLike(a) && IsSequence(b)) return Repeat(b, a, pos);
  }
  Unsupported(op, a, b, pos);
}

}  // namespace

bool Contains(const Value& container, const Value& item, SourcePos pos) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;  // iterates as empty
    case Value::Kind::kString:
      if (!item.is_string()) {
        Fail(std::string("'in <string>' requires string as left operand, not ") + item.TypeName(), pos);
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kArray:
      for (const Value& x : container.array()) {
        if (PyEquals(x, item)) return true;
      }
      return false;
    case Value::Kind::kObject:
      if ((item.is_array() && !item.is_tuple()) || item.is_object() || item.kind() == Value::Kind::kNamespace) {
        Fail(std::string("unhashable type: '") + item.TypeName() + "'", pos);
      }
      return item.is_string() && container.object().Find(item.str()) != nullptr;
    default: Fail(std::string("argument of type '") + container.TypeName() + "' is not iterable", pos);
  }
}

Value BinaryOp(std::string_view op, const Value& a, const Value& b, SourcePos pos) {
  if (op == "~") return Value::String(PyStr(a) + PyStr(b));
  if (op == "==") return Value::Bool(PyEquals(a, b));
  if (op == "!=") return Value::Bool(!PyEquals(a, b));
  if (op == "in") return Value::Bool(Contains(b, a, pos));
  if (op == "not in") return Value::Bool(!Contains(b, a, pos));
  if (a.is_undefined()) Fail(a.undefined_message(), pos);
  if (b.is_undefined()) Fail(b.undefined_message(), pos);
  if (op == "<") return Value::Bool(PyCompare(a, b, pos) < 0);
  if (op == ">") return Value::Bool(PyCompare(a, b, pos) > 0);
  if (op == "<=") return Value::Bool(PyCompare(a, b, pos) <= 0);
  if (op == ">=") return Value::Bool(PyCompare(a, b, pos) >= 0);
  if (op == "+" || op == "-" || op == "*" || op == "/" || op == "//" || op == "%" || op == "**") {
    return Arith(op, a, b, pos);
  }
  Fail("unknown operator '" + std::string(op) + "'", pos);
}

Value UnaryOp(std::string_view op, const Value& v, SourcePos pos) {
  if (v.is_undefined()) Fail(v.undefined_message(), pos);
  const bool neg = op == "-";
  if (v.kind() == Value::Kind::kFloat) return Value::Float(neg ? -v.float_value() : v.float_value());
  if (IsIntLike(v)) {
    return Value::Int(neg ? Sub(0, v.integer(), pos) : v.integer());
  }
  Fail("bad operand type for unary " + std::string(op) + ": '" + v.TypeName() + "'", pos);
}

}  // namespace specd::jinja
