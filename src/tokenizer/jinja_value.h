// Runtime values of the chat-template (Jinja subset) interpreter.
//
// The semantics follow @huggingface/jinja (the renderer transformers.js and
// the Hugging Face Hub use), which is this module's reference; where it
// differs from Python Jinja2 the reference wins, e.g. `{{ none }}` renders
// nothing, booleans print as "true"/"false", `==` on lists and dicts is
// identity (two equal-looking lists compare unequal unless they are the same
// object), and an integral JSON number (1.0) is an integer.
//
// Arrays and objects are immutable once built and shared by pointer, so
// slicing `messages[1:]` copies pointers, not messages, and identity
// comparison matches the reference. Namespaces are the only mutable values.
// Objects keep insertion order (tojson output depends on it).
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

// Errors inside the jinja_* files are thrown as JinjaError and turned into a
// Status at the ChatTemplate boundary; nothing throws out of the tokenizer
// module. `raised` marks a template's own raise_exception(msg).
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
// replaces the value in place (like a JS Map / Python dict).
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
  bool is_object() const { return kind_ == Kind::kObject; }
  // Objects and namespaces: what attribute filters (selectattr, map) accept.
  bool is_attribute_container() const { return kind_ == Kind::kObject || kind_ == Kind::kNamespace; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  double float_value() const { return f_; }
  // Int or float as a double.
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
  const std::string& str() const { return s_; }
  const Array& array() const { return *array_; }
  const ArrayPtr& array_ptr() const { return array_; }
  const Object& object() const { return *object_; }
  // Object or namespace entries.
  const Object& attributes() const { return kind_ == Kind::kNamespace ? *ns_ : *object_; }
  Object& namespace_object() const { return *ns_; }
  const Function& function() const { return *fn_; }

  // The reference's type names ("StringValue", ...), used in error messages.
  const char* TypeName() const;
  // Python-like truthiness as the reference defines it (empty containers are
  // false; a namespace is always true).
  bool Truthy() const;
  // Identity of the shared container (arrays, objects, namespaces,
  // functions); nullptr for scalars.
  const void* Identity() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  ArrayPtr array_;
  ObjectPtr object_;
  std::shared_ptr<Object> ns_;
  std::shared_ptr<Function> fn_;
};

// JSON data (request messages, tools) to values. Integral floats become
// integers, as JSON.parse + Number.isInteger would make them.
Value FromJson(const nlohmann::ordered_json& j);

// What `{{ value }}` prints (undefined and none print nothing).
std::string RenderString(const Value& v);
// JS `String(value.value)`: what `~` and string `+` concatenate
// (floats lose ".0": 2.0 ~ "" is "2"; lists join their items with ",").
std::string ConcatString(const Value& v);
// JavaScript Number.prototype.toString (shortest round-trip digits).
std::string JsNumberToString(double d);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator, key_separator;
};
// The reference's toJSON: Python json.dumps separators (", " and ": ", or ","
// and ": " when indenting), non-ASCII kept unless ensure_ascii.
// undefined_to_null=false prints "undefined" (used when a list is printed).
std::string ToJson(const Value& v, const JsonOptions& opts, bool undefined_to_null = true);
// JSON.stringify of one string.
std::string JsonQuote(std::string_view s, bool ensure_ascii);

// JS loose equality (`==`) on the underlying values.
bool LooseEquals(const Value& a, const Value& b);
// JS strict equality (`===`) on the underlying values (used by `in` on lists
// and the equalto test).
bool StrictEquals(const Value& a, const Value& b);

}  // namespace specd::jinja
