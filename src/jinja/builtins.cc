#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>
#include <string>

#include "jinja/pystr.h"
#include "jinja/strings.h"

namespace specd::jinja {
namespace {

// jinja2's builtin filters that this renderer implements.
const std::set<std::string_view, std::less<>> kFilters = {
    "safe",  "tojson",     "list",     "first",  "last",       "length",     "count",  "reverse",
    "sort",  "join",       "string",   "unique", "upper",      "lower",      "title",  "capitalize",
    "trim",  "indent",     "int",      "float",  "abs",        "items",      "dictsort", "default",
    "d",     "selectattr", "rejectattr", "select", "reject",   "map",        "replace"};
const std::set<std::string_view, std::less<>> kTests = {
    "boolean", "callable", "odd",      "even",     "false", "true",  "none",    "string",    "number",
    "integer", "float",    "iterable", "mapping",  "sequence", "lower", "upper", "defined", "undefined"};
// Python str and dict methods implemented here.
const std::set<std::string_view, std::less<>> kStringMethods = {
    "upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize", "startswith", "endswith",
    "split", "replace"};
const std::set<std::string_view, std::less<>> kDictMethods = {"get", "items", "keys", "values"};

// The sandbox's cap on range() (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

const std::string* OptString(const Value* v, const char* what, SourcePos pos) {
  if (v == nullptr || v->is_null()) return nullptr;
  if (!v->is_string()) Fail(std::string(what) + " arg must be None or str", pos);
  return &v->str();
}

Value StringMethod(const std::string& name, const std::string& s, SourcePos pos) {
  if (name == "upper") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(ToUpper(s)); });
  if (name == "lower") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(ToLower(s)); });
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return Value::MakeFunction(name, [s, left, right, name, pos](CallArgs& args) {
      return Value::String(Strip(s, OptString(args.Get(0, ""), name.c_str(), pos), left, right));
    });
  }
  if (name == "title") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(PyTitle(s)); });
  if (name == "capitalize") {
    return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(PyCapitalize(s)); });
  }
  if (name == "startswith" || name == "endswith") {
    bool starts = name == "startswith";
    return Value::MakeFunction(name, [s, starts, name, pos](CallArgs& args) {
      if (args.positional.empty()) Fail(name + "() takes at least 1 argument (0 given)", pos);
      auto test = [&](const std::string& p) {
        return starts ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                      : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      };
      const Value& pat = args.positional[0];
      if (pat.is_string()) return Value::Bool(test(pat.str()));
      if (pat.is_tuple()) {
        for (const Value& item : pat.array()) {
          if (!item.is_string()) Fail(name + "() tuple elements must be str", pos);
          if (test(item.str())) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      Fail(name + " first arg must be str or a tuple of str, not " + pat.TypeName(), pos);
    });
  }
  if (name == "split") {
    return Value::MakeFunction(name, [s, pos](CallArgs& args) {
      const std::string* sep = OptString(args.Get(0, "sep"), "sep", pos);
      const Value* maxsplit = args.Get(1, "maxsplit");
      if (maxsplit && maxsplit->kind() != Value::Kind::kInt && maxsplit->kind() != Value::Kind::kBool) {
        Fail("maxsplit must be an integer", pos);
      }
      if (sep && sep->empty()) Fail("empty separator", pos);
      Array parts;
      for (auto& p : Split(s, sep, maxsplit ? maxsplit->integer() : -1)) parts.push_back(Value::String(std::move(p)));
      return Value::MakeArray(std::move(parts));
    });
  }
  if (name == "replace") {
    return Value::MakeFunction(name, [s, pos](CallArgs& args) {
      const Value* from = args.Get(0, "");
      const Value* to = args.Get(1, "");
      if (!from || !to) Fail("replace expected at least 2 arguments", pos);
      if (!from->is_string() || !to->is_string()) Fail("replace() arguments must be str", pos);
      const Value* count = args.Get(2, "count");
      if (count && count->kind() != Value::Kind::kInt && count->kind() != Value::Kind::kBool) {
        Fail("replace() count must be an integer", pos);
      }
      return Value::String(Replace(s, from->str(), to->str(), count ? count->integer() : -1));
    });
  }
  return Value::Undefined("'str object' has no attribute '" + name + "'");
}

Value Pairs(const Object& obj) {
  Array out;
  for (const auto& [k, v] : obj.entries) out.push_back(Value::MakeTuple({Value::String(k), v}));
  return Value::MakeArray(std::move(out));
}

Value DictMethod(const std::string& name, const Value& object, SourcePos pos) {
  if (name == "get") {
    return Value::MakeFunction(name, [object, pos](CallArgs& args) {
      const Value* key = args.Get(0, "");
      if (!key) Fail("get expected at least 1 argument, got 0", pos);
      if (key->is_string()) {
        if (const Value* v = object.object().Find(key->str())) return *v;
      }
      const Value* def = args.Get(1, "");
      return def ? *def : Value::Null();
    });
  }
  if (name == "items") return Value::MakeFunction(name, [object](CallArgs&) { return Pairs(object.object()); });
  if (name == "keys") {
    return Value::MakeFunction(name, [object](CallArgs&) {
      Array out;
      for (const auto& e : object.object().entries) out.push_back(Value::String(e.first));
      return Value::MakeArray(std::move(out));
    });
  }
  // "values"
  return Value::MakeFunction(name, [object](CallArgs&) {
    Array out;
    for (const auto& e : object.object().entries) out.push_back(e.second);
    return Value::MakeArray(std::move(out));
  });
}

}  // namespace

bool IsKnownFilter(std::string_view name) { return kFilters.count(name) > 0; }
bool IsKnownTest(std::string_view name) { return kTests.count(name) > 0; }
bool IsKnownSelectTest(std::string_view name) {
  return IsKnownTest(name) || name == "equalto" || name == "eq";
}
bool IsKnownMethod(std::string_view name) { return kStringMethods.count(name) > 0 || kDictMethods.count(name) > 0; }
bool IsKnownGlobalFunction(std::string_view name) {
  return name == "namespace" || name == "range" || name == "raise_exception" || name == "strftime_now";
}

bool ApplyTest(std::string_view name, const Value& v, const Value* arg, SourcePos pos) {
  using K = Value::Kind;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "callable") return v.kind() == K::kFunction;
  if (name == "odd" || name == "even") {
    if (!v.is_numeric()) Fail(std::string("cannot test '") + v.TypeName() + "' for " + std::string(name), pos);
    double m;
    if (v.kind() == K::kFloat) {
      m = std::fmod(v.float_value(), 2.0);
      if (m < 0) m += 2.0;
    } else {
      m = static_cast<double>(((v.integer() % 2) + 2) % 2);
    }
    return name == "odd" ? m == 1 : m == 0;
  }
  if (name == "false") return v.kind() == K::kBool && !v.bool_value();
  if (name == "true") return v.kind() == K::kBool && v.bool_value();
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_numeric();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object() || v.is_undefined();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string() || v.is_undefined();
  if (name == "lower") return PyIsLower(PyStr(v));
  if (name == "upper") return PyIsUpper(PyStr(v));
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq") return PyEquals(v, arg ? *arg : Value());
  Fail("unknown test: " + std::string(name), pos);
}

Value GetAttr(const Value& object, const std::string& name, SourcePos pos) {
  if (object.is_undefined()) Fail(object.undefined_message(), pos);
  if (object.is_string() && kStringMethods.count(name)) return StringMethod(name, object.str(), pos);
  if (object.is_object()) {
    if (kDictMethods.count(name)) return DictMethod(name, object, pos);
    if (const Value* v = object.object().Find(name)) return *v;
  }
  if (object.kind() == Value::Kind::kNamespace) {
    if (const Value* v = object.attributes().Find(name)) return *v;
  }
  return Value::Undefined("'" + std::string(object.TypeName()) + " object' has no attribute '" + name + "'");
}

Value GetItem(const Value& object, const Value& key, SourcePos pos) {
  if (object.is_undefined()) Fail(object.undefined_message(), pos);
  const bool int_key = key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool;
  if ((object.is_array() || object.is_string()) && int_key) {
    int64_t i = key.integer();
    if (object.is_array()) {
      const int64_t n = static_cast<int64_t>(object.array().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return object.array()[i];
    } else {
      auto chars = SplitCodePoints(object.str());
      const int64_t n = static_cast<int64_t>(chars.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value::String(chars[i]);
    }
    return Value::Undefined(std::string("'") + object.TypeName() + " object' has no element " + PyRepr(key));
  }
  if (object.is_attribute_container() && key.is_string()) {
    if (const Value* v = object.attributes().Find(key.str())) return *v;
  }
  if (key.is_string()) return GetAttr(object, key.str(), pos);
  return Value::Undefined(std::string("'") + object.TypeName() + " object' has no element " + PyRepr(key));
}

Value Slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v, SourcePos pos) {
  if (object.is_undefined()) Fail(object.undefined_message(), pos);
  auto omitted = [](const Value& v) { return v.is_undefined() || v.is_null(); };
  auto index = [&](const Value& v) { return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool || omitted(v); };
  // jinja2 turns the TypeError of a bad slice into an undefined value.
  if ((!object.is_array() && !object.is_string()) || !index(start_v) || !index(stop_v) || !index(step_v)) {
    return Value::Undefined(std::string("'") + object.TypeName() + " object' cannot be sliced that way");
  }
  std::vector<std::string> chars;
  if (object.is_string()) chars = SplitCodePoints(object.str());
  const int64_t n = object.is_array() ? static_cast<int64_t>(object.array().size()) : static_cast<int64_t>(chars.size());
  int64_t step = omitted(step_v) ? 1 : step_v.integer();
  if (step == 0) Fail("slice step cannot be zero", pos);
  int64_t start, stop;
  if (step > 0) {
    start = omitted(start_v) ? 0 : start_v.integer();
    stop = omitted(stop_v) ? n : stop_v.integer();
    start = start < 0 ? std::max<int64_t>(n + start, 0) : std::min(start, n);
    stop = stop < 0 ? std::max<int64_t>(n + stop, 0) : std::min(stop, n);
  } else {
    start = omitted(start_v) ? n - 1 : start_v.integer();
    stop = omitted(stop_v) ? -1 : stop_v.integer();
    start = start < 0 ? std::max<int64_t>(n + start, -1) : std::min(start, n - 1);
    if (!omitted(stop_v)) stop = stop < 0 ? std::max<int64_t>(n + stop, -1) : std::min(stop, n - 1);
  }
  Array items;
  std::string text;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (object.is_array()) {
      items.push_back(object.array()[i]);
    } else {
      text += chars[i];
    }
  }
  if (object.is_string()) return Value::String(std::move(text));
  return object.is_tuple() ? Value::MakeTuple(std::move(items)) : Value::MakeArray(std::move(items));
}

Array Iterate(const Value& v, SourcePos pos) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kArray: return v.array();
    case Value::Kind::kString: {
      Array out;
      for (auto& c : SplitCodePoints(v.str())) out.push_back(Value::String(std::move(c)));
      return out;
    }
    case Value::Kind::kObject: {
      Array out;
      for (const auto& e : v.object().entries) out.push_back(Value::String(e.first));
      return out;
    }
    default: Fail(std::string("'") + v.TypeName() + "' object is not iterable", pos);
  }
}

Object GlobalFunctions() {
  Object g;
  g.Set("raise_exception", Value::MakeFunction("raise_exception", [](CallArgs& args) -> Value {
          const Value* msg = args.Get(0, "");
          std::string text = msg ? PyStr(*msg) : "";
          throw JinjaError{text, {}, true};
        }));
  g.Set("range", Value::MakeFunction("range", [](CallArgs& args) {
          auto num = [](const Value& v) {
            if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
              Fail(std::string("'") + v.TypeName() + "' object cannot be interpreted as an integer");
            }
            return v.integer();
          };
          if (args.positional.empty()) Fail("range expected at least 1 argument, got 0");
          if (args.positional.size() > 3) Fail("range expected at most 3 arguments");
          int64_t start = 0, stop, step = 1;
          if (args.positional.size() == 1) {
            stop = num(args.positional[0]);
          } else {
            start = num(args.positional[0]);
            stop = num(args.positional[1]);
            if (args.positional.size() > 2) step = num(args.positional[2]);
          }
          if (step == 0) Fail("range() arg 3 must not be zero");
          const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
          if (count > kMaxRange) {
            Fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) + ").");
          }
          Array out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::Int(i));
          return Value::MakeArray(std::move(out));
        }));
  g.Set("namespace", Value::MakeFunction("namespace", [](CallArgs& args) {
          if (args.positional.size() > 1) {
            Fail("namespace expected at most 1 argument, got " + std::to_string(args.positional.size()));
          }
          Object entries;
          if (args.positional.size() == 1) {
            const Value& src = args.positional[0];
            if (src.is_object()) {
              entries = src.object();
            } else if (src.is_array()) {
              for (const Value& pair : src.array()) {
                if (!pair.is_array() || pair.array().size() != 2 || !pair.array()[0].is_string()) {
                  Fail("namespace expected an object or an iterable of [key, value] pairs");
                }
                entries.Set(pair.array()[0].str(), pair.array()[1]);
              }
            } else {
              Fail(std::string("'") + src.TypeName() + "' object is not iterable");
            }
          }
          for (auto& [k, v] : args.keyword) entries.Set(k, v);
          return Value::MakeNamespace(std::move(entries));
        }));
  g.Set("strftime_now", Value::MakeFunction("strftime_now", [](CallArgs& args) {
          const Value* fmt = args.Get(0, "");
          if (!fmt || !fmt->is_string()) Fail("strftime_now() needs a format string");
          static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                          "July",    "August",   "September", "October", "November", "December"};
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
          const std::string& f = fmt->str();
          std::string out;
          for (size_t i = 0; i < f.size(); ++i) {
            if (f[i] != '%' || i + 1 >= f.size()) {
              out += f[i];
              continue;
            }
            char c = f[++i];
            switch (c) {
              case 'Y': out += std::to_string(tm.tm_year + 1900); break;
              case 'm': out += pad2(tm.tm_mon + 1); break;
              case 'd': out += pad2(tm.tm_mday); break;
              case 'b': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
              case 'B': out += kMonths[tm.tm_mon]; break;
              case 'H': out += pad2(tm.tm_hour); break;
              case 'M': out += pad2(tm.tm_min); break;
              case '%': out += '%'; break;
              default: out += '%'; out += c;
            }
          }
          return Value::String(out);
        }));
  return g;
}

}  // namespace specd::jinja
