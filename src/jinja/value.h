// Runtime values of the chat-template (Jinja subset) interpreter.
//
// The semantics are Python's, as jinja2 (set up as transformers'
// apply_chat_template sets it up) gives them to templates: `{{ none }}`
// prints "None", booleans print "True"/"False", lists and dicts print as
// their Python repr, `==` compares by value, integers and floats stay
// distinct (JSON 1.0 is the float 1.0). An undefined value (a missing
// variable, key or attribute) prints as "" and iterates as empty, and
// fails when used in arithmetic, comparison, attribute access or a call,
// as jinja2's default Undefined does.
//
// Lists and tuples are one kind (kArray) told apart by is_tuple(): tuples
// come from `(a, b)` literals, `a, b` and dict items, and print as `(a, b)`.
// Arrays and objects are immutable once built and shared by pointer, so
// slicing `messages[1:]` copies pointers, not messages. Namespaces are the
// only mutable values. Objects keep insertion order, as Python dicts do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace specd::jinja {

// 1-based line and column (column in characters) in the template source.
struct SourcePos {
  int line = 0;
  int col = 0;
};

// Errors inside the jinja module are thrown as JinjaError and turned into a
// Status at the ChatTemplate boundary (tokenizer/chat_template.cc); nothing
// throws out of the tokenizer module. `raised` marks a template's own
// raise_exception(msg).
struct JinjaError {
  std::string message;
  SourcePos pos;
  bool raised = false;
};
[[noreturn]] void Fail(std::string message, SourcePos pos = {});

class Value;
using Array = std::vector<Value>;
using ArrayPtr = std::shared_ptr<const Array>;

// Insertion-ordered string-keyed map; later Set() of an existing key
// replaces the value in place (like a Python dict).
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};
using ObjectPtr = std::shared_ptr<const Object>;

// Keyword arguments arrive separately from positional ones.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
  // Python-style parameter lookup: positional argument i, else the keyword
  // argument named `keyword` (none when empty); nullptr when not given.
  const Value* Get(size_t i, std::string_view keyword) const;
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

struct Namespace {
  std::shared_ptr<Object> object;
};

class Value {
 public:
  enum class Kind { kUndefined, kNull, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kFunction };

  Value() = default;  // undefined
  // Undefined with the error message to give when it is used ("'x' is
  // undefined").
  static Value Undefined(std::string hint) { Value v; v.s_ = std::move(hint); return v; }
  static Value Null() { return Value(Kind::kNull); }
  static Value Bool(bool b) { Value v(Kind::kBool); v.b_ = b; return v; }
  static Value Int(int64_t i) { Value v(Kind::kInt); v.i_ = i; return v; }
  static Value Float(double f) { Value v(Kind::kFloat); v.f_ = f; return v; }
  static Value String(std::string s) { Value v(Kind::kString); v.s_ = std::move(s); return v; }
  static Value MakeArray(Array items) {
    Value v(Kind::kArray);
    v.array_ = std::make_shared<const Array>(std::move(items));
    return v;
  }
  static Value MakeTuple(Array items) {
    Value v = MakeArray(std::move(items));
    v.tuple_ = true;
    return v;
  }
  static Value MakeObject(Object obj) {
    Value v(Kind::kObject);
    v.object_ = std::make_shared<const Object>(std::move(obj));
    return v;
  }
  static Value MakeNamespace(Object obj) {
    Value v(Kind::kNamespace);
    v.ns_ = std::make_shared<Object>(std::move(obj));
    return v;
  }
  static Value MakeFunction(std::string name, std::function<Value(CallArgs&)> fn) {
    Value v(Kind::kFunction);
    v.fn_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_tuple() const { return kind_ == Kind::kArray && tuple_; }
  // Int, float or bool (Python's bool is an int).
  bool is_numeric() const { return is_number() || kind_ == Kind::kBool; }
  bool is_object() const { return kind_ == Kind::kObject; }
  // Objects and namespaces: what attribute filters (selectattr, map) accept.
  bool is_attribute_container() const { return kind_ == Kind::kObject || kind_ == Kind::kNamespace; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  double float_value() const { return f_; }
  // Int or float as a double.
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
  // Int or bool as an integer (REQUIRES: kInt or kBool).
  int64_t integer() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  // Int, bool or float as a double.
  double numeric() const { return kind_ == Kind::kBool ? (b_ ? 1.0 : 0.0) : number(); }
  // What using an undefined value fails with.
  std::string undefined_message() const { return s_.empty() ? "value is undefined" : s_; }
  const std::string& str() const { return s_; }
  const Array& array() const { return *array_; }
  const ArrayPtr& array_ptr() const { return array_; }
  const Object& object() const { return *object_; }
  // Object or namespace entries.
  const Object& attributes() const { return kind_ == Kind::kNamespace ? *ns_ : *object_; }
  Object& namespace_object() const { return *ns_; }
  const Function& function() const { return *fn_; }

  // Python type names ("str", "NoneType", ...), used in error messages.
  const char* TypeName() const;
  // Python truthiness (empty containers, 0, 0.0, "" and none are false; nan,
  // namespaces and functions are true; undefined is false).
  bool Truthy() const;
  // Identity of the shared container (arrays, objects, namespaces,
  // functions); nullptr for scalars.
  const void* Identity() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  ArrayPtr array_;
  ObjectPtr object_;
  std::shared_ptr<Object> ns_;
  std::shared_ptr<Function> fn_;
};

// JSON data (request messages, tools) to values: JSON integers become ints,
// JSON numbers with a fraction or exponent floats, as Python's json.loads.
Value FromJson(const nlohmann::ordered_json& j);

struct JsonOptions {
  int indent = -1;  // < 0: single line; >= 0: newlines and this many spaces
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator, key_separator;
};
// Python json.dumps(v, ensure_ascii=False, ...) as transformers' tojson
// calls it: separators ", " and ": " (or "," and ": " when indenting),
// floats as Python repr, nan/inf as NaN/Infinity. Undefined, namespaces and
// functions are not serializable (throws).
std::string ToJson(const Value& v, const JsonOptions& opts);
// json.dumps of one string.
std::string JsonQuote(std::string_view s, bool ensure_ascii);

// Python `a == b`: numbers (and bools) by value, strings, lists, tuples and
// dicts by contents (a list never equals a tuple), undefined equals only
// undefined, namespaces and functions by identity.
bool PyEquals(const Value& a, const Value& b);
// Python ordering for `<` and sorting: -1, 0 or 1. Numbers (and bools) with
// each other, strings by code point, lists (tuples) lexicographically;
// anything else throws a TypeError-like JinjaError at `pos`.
int PyCompare(const Value& a, const Value& b, SourcePos pos);

}  // namespace specd::jinja
