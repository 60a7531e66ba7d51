#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>
#include <string>

#include "tokenizer/jinja_strings.h"

namespace specd::jinja {
namespace {

const std::set<std::string_view, std::less<>> kFilters = {
    "safe",   "tojson",     "list",       "first",  "last",   "length", "count",  "reverse",
    "sort",   "join",       "string",     "unique", "upper",  "lower",  "title",  "capitalize",
    "trim",   "indent",     "int",        "float",  "abs",    "items",  "keys",   "values",
    "dictsort", "bool",     "default",    "selectattr", "rejectattr", "select", "reject",
    "map",    "replace"};
const std::set<std::string_view, std::less<>> kTests = {
    "boolean",  "callable", "odd",      "even",     "false", "true",  "none",    "string", "number",
    "integer",  "iterable", "mapping",  "sequence", "lower", "upper", "defined", "undefined"};
const std::set<std::string_view, std::less<>> kMethods = {
    "upper",      "lower",    "strip", "title", "capitalize", "rstrip", "lstrip", "startswith",
    "endswith",   "split",    "replace", "get", "items",      "keys",   "values", "dictsort"};

// Caps on what a template can make us allocate (a request must not be able
// to take the server down through its chat template).
constexpr int64_t kMaxRange = 1 << 20;

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

[[noreturn]] void CannotApply(std::string_view filter, const Value& v, SourcePos pos) {
  Fail("Cannot apply filter " + Quoted(filter) + " to type: " + v.TypeName(), pos);
}

const Value* Arg(const CallArgs& args, size_t i, std::string_view keyword) {
  if (i < args.positional.size()) return &args.positional[i];
  return keyword.empty() ? nullptr : args.Keyword(keyword);
}

bool BoolArg(const CallArgs& args, size_t i, std::string_view kw, bool def, SourcePos pos) {
  const Value* v = Arg(args, i, kw);
  if (!v) return def;
  if (v->kind() != Value::Kind::kBool) Fail(std::string(kw) + " must be a boolean", pos);
  return v->bool_value();
}

Value StringFunction(const std::string& name, const std::string& s, SourcePos pos) {
  if (name == "upper") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(ToUpper(s)); });
  if (name == "lower") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(ToLower(s)); });
  // The reference ignores strip()'s argument and always strips whitespace.
  if (name == "strip") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(Trim(s)); });
  if (name == "lstrip") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(TrimStart(s)); });
  if (name == "rstrip") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(TrimEnd(s)); });
  if (name == "title") return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(TitleCase(s)); });
  if (name == "capitalize") {
    return Value::MakeFunction(name, [s](CallArgs&) { return Value::String(Capitalize(s)); });
  }
  if (name == "startswith" || name == "endswith") {
    bool starts = name == "startswith";
    return Value::MakeFunction(name, [s, starts, name, pos](CallArgs& args) {
      if (args.positional.empty()) Fail(name + "() requires at least one argument", pos);
      auto test = [&](const std::string& p) {
        return starts ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                      : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
      };
      const Value& pat = args.positional[0];
      if (pat.is_string()) return Value::Bool(test(pat.str()));
      if (pat.is_array()) {
        for (const Value& item : pat.array()) {
          if (!item.is_string()) Fail(name + "() tuple elements must be strings", pos);
          if (test(item.str())) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      Fail(name + "() argument must be a string or tuple of strings", pos);
    });
  }
  if (name == "split") {
    return Value::MakeFunction(name, [s, pos](CallArgs& args) {
      const Value* sep = Arg(args, 0, "");
      const Value* maxsplit = Arg(args, 1, "");
      if (sep && !sep->is_string() && !sep->is_null()) Fail("sep argument must be a string or null", pos);
      if (maxsplit && maxsplit->kind() != Value::Kind::kInt) Fail("maxsplit argument must be a number", pos);
      if (sep && sep->is_string() && sep->str().empty()) Fail("empty separator", pos);
      const std::string* sep_str = (sep && sep->is_string()) ? &sep->str() : nullptr;
      Array parts;
      for (auto& p : Split(s, sep_str, maxsplit ? maxsplit->int_value() : -1)) {
        parts.push_back(Value::String(std::move(p)));
      }
      return Value::MakeArray(std::move(parts));
    });
  }
  if (name == "replace") {
    return Value::MakeFunction(name, [s, pos](CallArgs& args) {
      if (args.positional.size() < 2) Fail("replace() requires at least two arguments", pos);
      const Value& from = args.positional[0];
      const Value& to = args.positional[1];
      if (!from.is_string() || !to.is_string()) Fail("replace() arguments must be strings", pos);
      const Value* count = Arg(args, 2, "count");
      if (count && count->kind() != Value::Kind::kInt && !count->is_null()) {
        Fail("replace() count argument must be a number or null", pos);
      }
      int64_t n = (count && !count->is_null()) ? count->int_value() : -1;
      return Value::String(Replace(s, from.str(), to.str(), n));
    });
  }
  return Value();
}

Value Pairs(const Object& obj) {
  Array out;
  for (const auto& [k, v] : obj.entries) out.push_back(Value::MakeArray({Value::String(k), v}));
  return Value::MakeArray(std::move(out));
}

// compareRuntimeValues: numbers (and booleans) with each other, strings with
// strings, none with none; anything else is an error. Checked for the whole
// list before sorting so that the comparator itself never throws.
enum class SortClass { kNull, kUndefined, kNumeric, kString, kOther };
SortClass ClassOf(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull: return SortClass::kNull;
    case Value::Kind::kUndefined: return SortClass::kUndefined;
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kBool: return SortClass::kNumeric;
    case Value::Kind::kString: return SortClass::kString;
    default: return SortClass::kOther;
  }
}
void CheckComparable(const std::vector<Value>& keys, SourcePos pos) {
  if (keys.size() < 2) return;
  SortClass c = ClassOf(keys[0]);
  for (const Value& k : keys) {
    SortClass ck = ClassOf(k);
    if (ck != c) Fail(std::string("Cannot compare ") + keys[0].TypeName() + " with " + k.TypeName(), pos);
  }
  if (c == SortClass::kOther) Fail(std::string("Cannot compare type: ") + keys[0].TypeName(), pos);
}
int Compare(const Value& a, const Value& b, bool case_sensitive) {
  if (ClassOf(a) == SortClass::kNumeric) {
    auto num = [](const Value& v) { return v.kind() == Value::Kind::kBool ? double(v.bool_value()) : v.number(); };
    double x = num(a), y = num(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string()) {
    std::string x = case_sensitive ? a.str() : ToLower(a.str());
    std::string y = case_sensitive ? b.str() : ToLower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return 0;
}

// "a.b.0" path lookup used by sort(attribute=) and map(attribute=).
Value AttributePath(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_attribute_container()) {
      const Value* f = v.attributes().Find(part);
      if (!f) return Value();
      v = *f;
    } else if (v.is_array()) {
      int64_t idx;
      if (!JsParseInt(part, &idx) || idx < 0 || idx >= static_cast<int64_t>(v.array().size())) return Value();
      Value next = v.array()[idx];
      v = next;
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// Items of a list whose `test` (or truthiness) holds, for select/selectattr.
Value SelectItems(const Value& list, std::string_view filter, const CallArgs& args, SourcePos pos) {
  const bool by_attr = filter == "selectattr" || filter == "rejectattr";
  const bool keep = filter == "select" || filter == "selectattr";
  size_t i = 0;
  const Value* attr = by_attr ? Arg(args, i++, "") : nullptr;
  if (by_attr && !attr) Fail(std::string(filter) + " needs an attribute name", pos);
  const Value* test = Arg(args, i++, "");
  const Value* value = Arg(args, i, "");
  Array out;
  for (const Value& item : list.array()) {
    if (by_attr && !item.is_attribute_container()) Fail("`" + std::string(filter) + "` can only be applied to array of objects", pos);
    const Value* subject = &item;
    if (by_attr) {
      subject = item.attributes().Find(attr->str());
      if (!subject) {
        if (!keep) out.push_back(item);
        continue;
      }
    }
    bool result = test ? ApplyTest(test->str(), *subject, value, pos) : subject->Truthy();
    if (result == keep) out.push_back(item);
  }
  return Value::MakeArray(std::move(out));
}

Value SortList(const Value& list, const CallArgs& args, SourcePos pos) {
  bool reverse = BoolArg(args, 0, "reverse", false, pos);
  bool case_sensitive = BoolArg(args, 1, "case_sensitive", false, pos);
  const Value* attribute = Arg(args, 2, "attribute");
  if (attribute && !attribute->is_string() && attribute->kind() != Value::Kind::kInt && !attribute->is_null()) {
    Fail("attribute must be a string, integer, or null", pos);
  }
  const Array& items = list.array();
  std::vector<Value> keys;
  for (const Value& item : items) {
    if (!attribute || attribute->is_null()) {
      keys.push_back(item);
    } else {
      keys.push_back(AttributePath(item, attribute->is_string() ? attribute->str()
                                                                 : std::to_string(attribute->int_value())));
    }
  }
  CheckComparable(keys, pos);
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int c = Compare(keys[a], keys[b], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  Array out;
  for (size_t i : order) out.push_back(items[i]);
  return Value::MakeArray(std::move(out));
}

Value DictSort(const Object& obj, const CallArgs& args, SourcePos pos) {
  bool case_sensitive = BoolArg(args, 0, "case_sensitive", false, pos);
  const Value* by = Arg(args, 1, "by");
  if (by && !by->is_string()) Fail("by must be a string", pos);
  std::string by_str = by ? by->str() : "key";
  if (by_str != "key" && by_str != "value") Fail("by must be either 'key' or 'value'", pos);
  bool reverse = BoolArg(args, 2, "reverse", false, pos);
  std::vector<Value> keys;
  for (const auto& [k, v] : obj.entries) keys.push_back(by_str == "key" ? Value::String(k) : v);
  CheckComparable(keys, pos);
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int c = Compare(keys[a], keys[b], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  Array out;
  for (size_t i : order) {
    out.push_back(Value::MakeArray({Value::String(obj.entries[i].first), obj.entries[i].second}));
  }
  return Value::MakeArray(std::move(out));
}

Value ObjectFunction(const std::string& name, const Value& object, SourcePos pos) {
  if (name == "get") {
    return Value::MakeFunction(name, [object, pos](CallArgs& args) {
      const Value* key = Arg(args, 0, "");
      if (!key || !key->is_string()) {
        Fail(std::string("Object key must be a string: got ") + (key ? key->TypeName() : "UndefinedValue"), pos);
      }
      if (const Value* v = object.object().Find(key->str())) return *v;
      const Value* def = Arg(args, 1, "");
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
  if (name == "values") {
    return Value::MakeFunction(name, [object](CallArgs&) {
      Array out;
      for (const auto& e : object.object().entries) out.push_back(e.second);
      return Value::MakeArray(std::move(out));
    });
  }
  if (name == "dictsort") {
    return Value::MakeFunction(name, [object, pos](CallArgs& args) { return DictSort(object.object(), args, pos); });
  }
  return Value();
}

std::string JoinRaw(const Value& list, const std::string& sep) {
  std::string out;
  bool first = true;
  for (const Value& v : list.array()) {
    if (!first) out += sep;
    first = false;
    if (!v.is_undefined() && !v.is_null()) out += ConcatString(v);
  }
  return out;
}

std::string Indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    size_t nl = s.find('\n', start);
    std::string_view l = std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (line > 0) out += "\n";
    if (!((!first && line == 0) || (!blank && l.empty()))) out += pad;
    out += l;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

Value NoArgFilter(const Value& v, std::string_view name, SourcePos pos) {
  switch (v.kind()) {
    case Value::Kind::kArray: {
      const Array& a = v.array();
      if (name == "list") return v;
      if (name == "first") return a.empty() ? Value() : a.front();
      if (name == "last") return a.empty() ? Value() : a.back();
      if (name == "length" || name == "count") return Value::Int(static_cast<int64_t>(a.size()));
      if (name == "reverse") return Value::MakeArray(Array(a.rbegin(), a.rend()));
      if (name == "sort") {
        CallArgs none;
        return SortList(v, none, pos);
      }
      if (name == "join") return Value::String(JoinRaw(v, ""));
      if (name == "string") return Value::String(ToJson(v, JsonOptions{}, false));
      if (name == "unique") {
        Array out;
        for (const Value& item : a) {
          bool seen = std::any_of(out.begin(), out.end(), [&](const Value& o) { return StrictEquals(o, item); });
          if (!seen) out.push_back(item);
        }
        return Value::MakeArray(std::move(out));
      }
      Fail("Unknown ArrayValue filter: " + std::string(name), pos);
    }
    case Value::Kind::kString: {
      const std::string& s = v.str();
      if (name == "length" || name == "count") return Value::Int(Utf16Length(s));
      if (name == "upper") return Value::String(ToUpper(s));
      if (name == "lower") return Value::String(ToLower(s));
      if (name == "title") return Value::String(TitleCase(s));
      if (name == "capitalize") return Value::String(Capitalize(s));
      if (name == "trim") return Value::String(Trim(s));
      if (name == "indent") return Value::String(Indent(s, "    ", false, false));
      if (name == "join" || name == "string") return v;
      if (name == "int") {
        int64_t i;
        return Value::Int(JsParseInt(s, &i) ? i : 0);
      }
      if (name == "float") {
        double d;
        return Value::Float(JsParseFloat(s, &d) ? d : 0.0);
      }
      Fail("Unknown StringValue filter: " + std::string(name), pos);
    }
    case Value::Kind::kInt:
    case Value::Kind::kFloat: {
      bool is_int = v.kind() == Value::Kind::kInt;
      if (name == "abs") return is_int ? Value::Int(std::llabs(v.int_value())) : Value::Float(std::fabs(v.float_value()));
      if (name == "int") return is_int ? v : Value::Int(static_cast<int64_t>(std::trunc(v.float_value())));
      if (name == "float") return Value::Float(v.number());
      if (name == "string") return Value::String(RenderString(v));
      Fail("Unknown NumericValue filter: " + std::string(name), pos);
    }
    case Value::Kind::kObject: {
      if (name == "items") return Pairs(v.object());
      if (name == "length" || name == "count") return Value::Int(static_cast<int64_t>(v.object().entries.size()));
      Value fn = ObjectFunction(std::string(name), v, pos);
      if (fn.kind() == Value::Kind::kFunction) {
        CallArgs none;
        return fn.function().call(none);
      }
      Fail("Unknown ObjectValue filter: " + std::string(name), pos);
    }
    case Value::Kind::kBool: {
      if (name == "bool") return v;
      if (name == "int") return Value::Int(v.bool_value() ? 1 : 0);
      if (name == "float") return Value::Float(v.bool_value() ? 1.0 : 0.0);
      if (name == "string") return Value::String(v.bool_value() ? "true" : "false");
      Fail("Unknown BooleanValue filter: " + std::string(name), pos);
    }
    default: CannotApply(name, v, pos);
  }
}

JsonOptions TojsonOptions(const CallArgs& args, SourcePos pos) {
  JsonOptions opts;
  if (const Value* indent = args.Keyword("indent"); indent && !indent->is_null()) {
    if (indent->kind() != Value::Kind::kInt) Fail("If set, indent must be a number", pos);
    if (indent->int_value() < 0 || indent->int_value() > 64) Fail("indent out of range", pos);
    opts.indent = static_cast<int>(indent->int_value());
  }
  if (const Value* a = args.Keyword("ensure_ascii")) {
    if (a->kind() != Value::Kind::kBool) Fail("If set, ensure_ascii must be a boolean", pos);
    opts.ensure_ascii = a->bool_value();
  }
  if (const Value* s = args.Keyword("sort_keys")) {
    if (s->kind() != Value::Kind::kBool) Fail("If set, sort_keys must be a boolean", pos);
    opts.sort_keys = s->bool_value();
  }
  if (const Value* sep = args.Keyword("separators"); sep && !sep->is_null()) {
    if (!sep->is_array() || sep->array().size() != 2 || !sep->array()[0].is_string() ||
        !sep->array()[1].is_string()) {
      Fail("separators must be a tuple of two strings", pos);
    }
    opts.has_separators = true;
    opts.item_separator = sep->array()[0].str();
    opts.key_separator = sep->array()[1].str();
  }
  return opts;
}

}  // namespace

bool IsKnownFilter(std::string_view name) { return kFilters.count(name) > 0; }
bool IsKnownTest(std::string_view name) { return kTests.count(name) > 0; }
bool IsKnownSelectTest(std::string_view name) {
  return IsKnownTest(name) || name == "equalto" || name == "eq";
}
bool IsKnownMethod(std::string_view name) { return kMethods.count(name) > 0; }
bool IsKnownGlobalFunction(std::string_view name) {
  return name == "namespace" || name == "range" || name == "raise_exception" || name == "strftime_now";
}

Value ApplyFilter(const Value& v, std::string_view name, bool has_args, CallArgs& args, SourcePos pos) {
  if (name == "safe") return v;
  if (name == "tojson") return Value::String(ToJson(v, has_args ? TojsonOptions(args, pos) : JsonOptions{}));
  if ((name == "select" || name == "reject") && v.is_array()) return SelectItems(v, name, args, pos);
  // name() with no arguments behaves like name.
  if (!has_args || (args.positional.empty() && args.keyword.empty() && name != "default" &&
                    name != "map" && name != "join")) {
    return NoArgFilter(v, name, pos);
  }
  if (name == "join") {
    const Value* sep = Arg(args, 0, "separator");
    if (sep && !sep->is_string()) Fail("separator must be a string", pos);
    std::string sep_str = sep ? sep->str() : "";
    if (v.is_string()) {
      std::string out;
      auto chars = SplitCodePoints(v.str());
      for (size_t i = 0; i < chars.size(); ++i) out += (i ? sep_str : "") + chars[i];
      return Value::String(out);
    }
    if (v.is_array()) return Value::String(JoinRaw(v, sep_str));
    CannotApply(name, v, pos);
  }
  if (name == "int" || name == "float") {
    const bool to_int = name == "int";
    const Value* def = Arg(args, 0, "default");
    Value fallback = def ? *def : (to_int ? Value::Int(0) : Value::Float(0));
    if (v.is_string()) {
      if (to_int) {
        int64_t i;
        return JsParseInt(v.str(), &i) ? Value::Int(i) : fallback;
      }
      double d;
      return JsParseFloat(v.str(), &d) ? Value::Float(d) : fallback;
    }
    if (v.is_number() || v.kind() == Value::Kind::kBool) return NoArgFilter(v, name, pos);
    CannotApply(name, v, pos);
  }
  if (name == "default") {
    Value def = args.positional.empty() ? Value::String("") : args.positional[0];
    bool boolean = BoolArg(args, 1, "boolean", false, pos);
    if (v.is_undefined() || (boolean && !v.Truthy())) return def;
    return v;
  }
  if (v.is_array()) {
    if (name == "sort") return SortList(v, args, pos);
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      return SelectItems(v, name, args, pos);
    }
    if (name == "map") {
      const Value* attr = args.Keyword("attribute");
      if (!attr) Fail("`map` expressions without `attribute` set are not currently supported.", pos);
      if (!attr->is_string()) Fail("attribute must be a string", pos);
      const Value* def = args.Keyword("default");
      Array out;
      for (const Value& item : v.array()) {
        if (!item.is_attribute_container()) Fail("items in map must be an object", pos);
        Value got = AttributePath(item, attr->str());
        out.push_back(got.is_undefined() && def ? *def : got);
      }
      return Value::MakeArray(std::move(out));
    }
    Fail("Unknown ArrayValue filter: " + std::string(name), pos);
  }
  if (v.is_string()) {
    if (name == "indent") {
      const Value* width = Arg(args, 0, "width");
      std::string pad = "    ";
      if (width) {
        if (width->is_string()) {
          pad = width->str();
        } else if (width->kind() == Value::Kind::kInt) {
          pad = std::string(std::clamp<int64_t>(width->int_value(), 0, 1024), ' ');
        } else {
          Fail("width must be an integer or a string", pos);
        }
      }
      const Value* first = Arg(args, 1, "first");
      const Value* blank = Arg(args, 2, "blank");
      return Value::String(Indent(v.str(), pad, first && first->Truthy(), blank && blank->Truthy()));
    }
    if (name == "replace") {
      Value fn = StringFunction("replace", v.str(), pos);
      return fn.function().call(args);
    }
    Fail("Unknown StringValue filter: " + std::string(name), pos);
  }
  if (v.is_object()) {
    Value fn = ObjectFunction(std::string(name), v, pos);
    if (fn.kind() == Value::Kind::kFunction) return fn.function().call(args);
    Fail("Unknown ObjectValue filter: " + std::string(name), pos);
  }
  CannotApply(name, v, pos);
}

bool ApplyTest(std::string_view name, const Value& v, const Value* arg, SourcePos pos) {
  using K = Value::Kind;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "callable") return v.kind() == K::kFunction;
  if (name == "odd" || name == "even") {
    if (v.kind() != K::kInt) Fail("cannot " + std::string(name) + " on " + v.TypeName(), pos);
    bool odd = v.int_value() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return v.kind() == K::kBool && !v.bool_value();
  if (name == "true") return v.kind() == K::kBool && v.bool_value();
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "iterable") return v.is_array() || v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "lower") return v.is_string() && v.str() == ToLower(v.str());
  if (name == "upper") return v.is_string() && v.str() == ToUpper(v.str());
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq") return StrictEquals(v, arg ? *arg : Value());
  Fail("Unknown test: " + std::string(name), pos);
}

Value GetMember(const Value& object, const Value& key, SourcePos pos) {
  if (object.is_attribute_container()) {
    if (!key.is_string()) Fail(std::string("Cannot access property with non-string: got ") + key.TypeName(), pos);
    if (const Value* v = object.attributes().Find(key.str())) return *v;
    if (object.is_object()) return ObjectFunction(key.str(), object, pos);
    return Value();
  }
  if (object.is_array() || object.is_string()) {
    if (key.kind() == Value::Kind::kInt) {
      int64_t i = key.int_value();
      if (object.is_array()) {
        int64_t n = static_cast<int64_t>(object.array().size());
        if (i < 0) i += n;
        return (i >= 0 && i < n) ? object.array()[i] : Value();
      }
      auto chars = SplitCodePoints(object.str());
      int64_t n = static_cast<int64_t>(chars.size());
      if (i < 0) i += n;
      return (i >= 0 && i < n) ? Value::String(chars[i]) : Value();
    }
    if (key.is_string()) {
      if (key.str() == "length") {
        return Value::Int(object.is_array() ? static_cast<int64_t>(object.array().size()) : Utf16Length(object.str()));
      }
      return object.is_string() ? StringFunction(key.str(), object.str(), pos) : Value();
    }
    Fail(std::string("Cannot access property with non-string/non-number: got ") + key.TypeName(), pos);
  }
  if (!key.is_string()) Fail(std::string("Cannot access property with non-string: got ") + key.TypeName(), pos);
  return Value();
}

Value Slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v, SourcePos pos) {
  if (!object.is_array() && !object.is_string()) Fail("Slice object must be an array or string", pos);
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (v->kind() != Value::Kind::kInt && !v->is_undefined()) Fail("Slice indices must be integers or undefined", pos);
  }
  std::vector<std::string> chars;
  if (object.is_string()) chars = SplitCodePoints(object.str());
  const int64_t n = object.is_array() ? static_cast<int64_t>(object.array().size()) : static_cast<int64_t>(chars.size());
  int64_t step = step_v.is_undefined() ? 1 : step_v.int_value();
  if (step == 0) Fail("slice step cannot be zero", pos);
  int64_t start, stop;
  if (step > 0) {
    start = start_v.is_undefined() ? 0 : start_v.int_value();
    stop = stop_v.is_undefined() ? n : stop_v.int_value();
    start = start < 0 ? std::max<int64_t>(n + start, 0) : std::min(start, n);
    stop = stop < 0 ? std::max<int64_t>(n + stop, 0) : std::min(stop, n);
  } else {
    start = start_v.is_undefined() ? n - 1 : start_v.int_value();
    stop = stop_v.is_undefined() ? -1 : stop_v.int_value();
    start = start < 0 ? std::max<int64_t>(n + start, -1) : std::min(start, n - 1);
    stop = stop < -1 ? std::max<int64_t>(n + stop, -1) : std::min(stop, n - 1);
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
  return object.is_array() ? Value::MakeArray(std::move(items)) : Value::String(std::move(text));
}

Object GlobalFunctions() {
  Object g;
  g.Set("raise_exception", Value::MakeFunction("raise_exception", [](CallArgs& args) -> Value {
          const Value* msg = Arg(args, 0, "");
          std::string text = (!msg || msg->is_undefined()) ? "" : ConcatString(*msg);
          throw JinjaError{text, {}, true};
        }));
  g.Set("range", Value::MakeFunction("range", [](CallArgs& args) {
          auto num = [](const Value& v) {
            if (!v.is_number()) Fail("range() arguments must be numbers");
            return v.number();
          };
          if (args.positional.empty()) Fail("range expected at least 1 argument, got 0");
          double start = 0, stop, step = 1;
          if (args.positional.size() == 1) {
            stop = num(args.positional[0]);
          } else {
            start = num(args.positional[0]);
            stop = num(args.positional[1]);
            if (args.positional.size() > 2) step = num(args.positional[2]);
          }
          if (step == 0) Fail("range() step must not be zero");
          double count = std::ceil((stop - start) / step);
          if (count > kMaxRange) Fail("range() too long: " + JsNumberToString(count) + " items");
          Array out;
          for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
            out.push_back(i == std::trunc(i) ? Value::Int(static_cast<int64_t>(i)) : Value::Float(i));
          }
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
          const Value* fmt = Arg(args, 0, "");
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
