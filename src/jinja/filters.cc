// The filters of the chat-template Jinja subset (see builtins.h), each
// with the signature and behaviour of jinja2's filter of that name.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "jinja/builtins.h"
#include "jinja/pystr.h"
#include "jinja/strings.h"

namespace specd::jinja {
namespace {

[[noreturn]] void BadOperand(std::string_view filter, const Value& v, SourcePos pos) {
  if (v.is_undefined()) Fail(v.undefined_message(), pos);
  Fail("filter '" + std::string(filter) + "' cannot be applied to a value of type '" + v.TypeName() + "'", pos);
}

bool Flag(const CallArgs& args, size_t i, std::string_view keyword, bool def) {
  const Value* v = args.Get(i, keyword);
  return v ? v->Truthy() : def;
}

// jinja2's make_attrgetter: "a.b.0" looked up with item access (digits
// become integer indices); an absent attribute is undefined.
Value AttributePath(const Value& item, const Value& attribute, SourcePos pos) {
  if (!attribute.is_string()) return GetItem(item, attribute, pos);
  Value v = item;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    int64_t idx;
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = digits && PyParseInt(part, &idx) ? GetItem(v, Value::Int(idx), pos) : GetItem(v, Value::String(part), pos);
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// The sort key of jinja2's ignore_case postprocess: strings lowercased.
Value CaseKey(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::String(ToLower(v.str())) : v;
}

// Keys for sort(attribute=...): one per comma-separated attribute, as
// make_multi_attrgetter builds them.
Array SortKey(const Value& item, const Value* attribute, bool case_sensitive, SourcePos pos) {
  if (attribute == nullptr || attribute->is_null()) return {CaseKey(item, case_sensitive)};
  Array keys;
  if (attribute->is_string()) {
    const std::string& attrs = attribute->str();
    size_t start = 0;
    while (true) {
      const size_t comma = attrs.find(',', start);
      Value part = Value::String(attrs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      keys.push_back(CaseKey(AttributePath(item, part, pos), case_sensitive));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    keys.push_back(CaseKey(AttributePath(item, *attribute, pos), case_sensitive));
  }
  return keys;
}

// list_keys: keys compare as Python lists do (equal items are skipped, not
// ordered), as sort's make_multi_attrgetter keys are lists; otherwise each
// key is ordered directly (dictsort).
Array SortedBy(const Array& items, const std::vector<Array>& keys, bool reverse, bool list_keys, SourcePos pos) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto compare = [&](size_t a, size_t b) {
    for (size_t k = 0; k < keys[a].size(); ++k) {
      if (list_keys && PyEquals(keys[a][k], keys[b][k])) continue;
      int c = PyCompare(keys[a][k], keys[b][k], pos);
      if (c != 0) return c;
    }
    return 0;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? compare(b, a) < 0 : compare(a, b) < 0;
  });
  Array out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(items[i]);
  return out;
}

Value Sort(const Value& v, const CallArgs& args, SourcePos pos) {
  const bool reverse = Flag(args, 0, "reverse", false);
  const bool case_sensitive = Flag(args, 1, "case_sensitive", false);
  const Value* attribute = args.Get(2, "attribute");
  Array items = Iterate(v, pos);
  std::vector<Array> keys;
  for (const Value& item : items) keys.push_back(SortKey(item, attribute, case_sensitive, pos));
  return Value::MakeArray(SortedBy(items, keys, reverse, true, pos));
}

Value DictSort(const Value& v, const CallArgs& args, SourcePos pos) {
  if (!v.is_object()) BadOperand("dictsort", v, pos);
  const bool case_sensitive = Flag(args, 0, "case_sensitive", false);
  const Value* by = args.Get(1, "by");
  const std::string by_str = by && by->is_string() ? by->str() : "key";
  if (by && (!by->is_string() || (by_str != "key" && by_str != "value"))) {
    Fail("You can only sort by either 'key' or 'value'", pos);
  }
  const bool reverse = Flag(args, 2, "reverse", false);
  Array items;
  std::vector<Array> keys;
  for (const auto& [k, val] : v.object().entries) {
    items.push_back(Value::MakeTuple({Value::String(k), val}));
    keys.push_back({CaseKey(by_str == "key" ? Value::String(k) : val, case_sensitive)});
  }
  return Value::MakeArray(SortedBy(items, keys, reverse, false, pos));
}

Value Unique(const Value& v, const CallArgs& args, SourcePos pos) {
  const bool case_sensitive = Flag(args, 0, "case_sensitive", false);
  const Value* attribute = args.Get(1, "attribute");
  Array out, seen;
  for (const Value& item : Iterate(v, pos)) {
    Value key = CaseKey(attribute && !attribute->is_null() ? AttributePath(item, *attribute, pos) : item, case_sensitive);
    if (key.is_array() && !key.is_tuple()) Fail("unhashable type: 'list'", pos);
    if (key.is_object()) Fail("unhashable type: 'dict'", pos);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return PyEquals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::MakeArray(std::move(out));
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...).
Value SelectItems(const Value& list, std::string_view filter, const CallArgs& args, SourcePos pos) {
  const bool by_attr = filter == "selectattr" || filter == "rejectattr";
  const bool keep = filter == "select" || filter == "selectattr";
  size_t i = 0;
  const Value* attr = by_attr ? args.Get(i++, "") : nullptr;
  if (by_attr && !attr) Fail(std::string(filter) + " needs an attribute name", pos);
  const Value* test = args.Get(i++, "");
  const Value* value = args.Get(i, "");
  Array out;
  for (const Value& item : Iterate(list, pos)) {
    const Value subject = by_attr ? AttributePath(item, *attr, pos) : item;
    const bool result = test ? ApplyTest(test->str(), subject, value, pos) : subject.Truthy();
    if (result == keep) out.push_back(item);
  }
  return Value::MakeArray(std::move(out));
}

// map(attribute='a.b', default=d) or map('filter', args...).
Value Map(const Value& v, CallArgs& args, SourcePos pos) {
  Array out;
  if (const Value* attr = args.Keyword("attribute")) {
    const Value* def = args.Keyword("default");
    for (const Value& item : Iterate(v, pos)) {
      Value got = AttributePath(item, *attr, pos);
      out.push_back(got.is_undefined() && def ? *def : got);
    }
    return Value::MakeArray(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) Fail("map requires a filter name or attribute=", pos);
  const std::string filter = args.positional[0].str();
  if (!IsKnownFilter(filter)) Fail("No filter named '" + filter + "'", pos);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : Iterate(v, pos)) out.push_back(ApplyFilter(item, filter, rest, pos));
  return Value::MakeArray(std::move(out));
}

// do_indent: splitlines() after appending a newline, so a trailing newline
// is dropped and \r\n and other line breaks become \n.
std::string Indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::vector<std::string> lines = SplitLines(s + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return first ? pad + out : out;
}

JsonOptions TojsonOptions(const CallArgs& args, SourcePos pos) {
  JsonOptions opts;
  opts.ensure_ascii = Flag(args, 0, "ensure_ascii", false);
  if (const Value* indent = args.Get(1, "indent"); indent && !indent->is_null()) {
    if (indent->kind() != Value::Kind::kInt) Fail("tojson: indent must be an integer", pos);
    opts.indent = static_cast<int>(std::clamp<int64_t>(indent->int_value(), 0, 64));
  }
  if (const Value* sep = args.Get(2, "separators"); sep && !sep->is_null()) {
    if (!sep->is_array() || sep->array().size() != 2 || !sep->array()[0].is_string() ||
        !sep->array()[1].is_string()) {
      Fail("tojson: separators must be a pair of strings", pos);
    }
    opts.has_separators = true;
    opts.item_separator = sep->array()[0].str();
    opts.key_separator = sep->array()[1].str();
  }
  opts.sort_keys = Flag(args, 3, "sort_keys", false);
  return opts;
}

// do_int: int(x), else int(float(x)) for strings, else the default.
Value ToInt(const Value& v, const CallArgs& args, SourcePos pos) {
  const Value* def = args.Get(0, "default");
  const Value* base = args.Get(1, "base");
  if (base && !(base->kind() == Value::Kind::kInt && base->int_value() == 10)) Fail("unsupported: int base other than 10", pos);
  const Value fallback = def ? *def : Value::Int(0);
  auto from_double = [&](double d) {
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) Fail("cannot convert float infinity to integer", pos);
    if (std::fabs(d) >= 9.2e18) Fail("integer result does not fit in 64 bits", pos);
    return Value::Int(static_cast<int64_t>(std::trunc(d)));
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined: Fail(v.undefined_message(), pos);
    case Value::Kind::kInt:
    case Value::Kind::kBool: return Value::Int(v.integer());
    case Value::Kind::kFloat: return from_double(v.float_value());
    case Value::Kind::kString: {
      int64_t i;
      if (PyParseInt(v.str(), &i)) return Value::Int(i);
      double d;
      if (PyParseFloat(v.str(), &d)) return from_double(d);
      return fallback;
    }
    default: return fallback;
  }
}

Value ToFloat(const Value& v, const CallArgs& args, SourcePos pos) {
  const Value* def = args.Get(0, "default");
  const Value fallback = def ? *def : Value::Float(0.0);
  if (v.is_undefined()) Fail(v.undefined_message(), pos);
  if (v.is_numeric()) return Value::Float(v.numeric());
  double d;
  if (v.is_string() && PyParseFloat(v.str(), &d)) return Value::Float(d);
  return fallback;
}

Value Length(const Value& v, SourcePos pos) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value::Int(0);
    case Value::Kind::kString: return Value::Int(CodePointLength(v.str()));
    case Value::Kind::kArray: return Value::Int(static_cast<int64_t>(v.array().size()));
    case Value::Kind::kObject: return Value::Int(static_cast<int64_t>(v.object().entries.size()));
    default: Fail(std::string("object of type '") + v.TypeName() + "' has no len()", pos);
  }
}

}  // namespace

Value ApplyFilter(const Value& v, std::string_view name, CallArgs& args, SourcePos pos) {
  if (name == "safe") return v;
  if (name == "tojson") return Value::String(ToJson(v, TojsonOptions(args, pos)));
  if (name == "string") return Value::String(PyStr(v));
  if (name == "length" || name == "count") return Length(v, pos);
  if (name == "list") return Value::MakeArray(Iterate(v, pos));
  if (name == "first" || name == "last") {
    Array items = Iterate(v, pos);
    if (items.empty()) return Value::Undefined("No " + std::string(name) + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = SplitCodePoints(v.str());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::String(std::move(out));
    }
    Array items = Iterate(v, pos);
    return Value::MakeArray(Array(items.rbegin(), items.rend()));
  }
  if (name == "sort") return Sort(v, args, pos);
  if (name == "unique") return Unique(v, args, pos);
  if (name == "dictsort") return DictSort(v, args, pos);
  if (name == "items") {
    if (v.is_undefined()) return Value::MakeArray({});
    if (!v.is_object()) BadOperand(name, v, pos);
    Array out;
    for (const auto& [k, val] : v.object().entries) out.push_back(Value::MakeTuple({Value::String(k), val}));
    return Value::MakeArray(std::move(out));
  }
  if (name == "join") {
    const Value* sep = args.Get(0, "d");
    const Value* attribute = args.Get(1, "attribute");
    const std::string sep_str = sep ? PyStr(*sep) : "";
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(v, pos)) {
      if (!first) out += sep_str;
      first = false;
      out += PyStr(attribute && !attribute->is_null() ? AttributePath(item, *attribute, pos) : item);
    }
    return Value::String(std::move(out));
  }
  if (name == "upper") return Value::String(ToUpper(PyStr(v)));
  if (name == "lower") return Value::String(ToLower(PyStr(v)));
  if (name == "capitalize") return Value::String(PyCapitalize(PyStr(v)));
  if (name == "title") return Value::String(JinjaTitle(PyStr(v)));
  if (name == "trim") {
    const Value* chars = args.Get(0, "chars");
    if (chars && !chars->is_null() && !chars->is_string()) Fail("strip arg must be None or str", pos);
    return Value::String(Strip(PyStr(v), chars && chars->is_string() ? &chars->str() : nullptr, true, true));
  }
  if (name == "replace") {
    const Value* from = args.Get(0, "old");
    const Value* to = args.Get(1, "new");
    if (!from || !to) Fail("replace needs the old and new strings", pos);
    const Value* count = args.Get(2, "count");
    int64_t n = -1;
    if (count && !count->is_null()) {
      if (count->kind() != Value::Kind::kInt && count->kind() != Value::Kind::kBool) {
        Fail("replace count must be an integer", pos);
      }
      n = count->integer();
    }
    return Value::String(Replace(PyStr(v), PyStr(*from), PyStr(*to), n));
  }
  if (name == "indent") {
    if (!v.is_string()) BadOperand(name, v, pos);
    const Value* width = args.Get(0, "width");
    std::string pad = "    ";
    if (width) {
      if (width->is_string()) {
        pad = width->str();
      } else if (width->kind() == Value::Kind::kInt || width->kind() == Value::Kind::kBool) {
        pad = std::string(std::clamp<int64_t>(width->integer(), 0, 1024), ' ');
      } else {
        Fail("indent width must be an integer or a string", pos);
      }
    }
    return Value::String(Indent(v.str(), pad, Flag(args, 1, "first", false), Flag(args, 2, "blank", false)));
  }
  if (name == "int") return ToInt(v, args, pos);
  if (name == "float") return ToFloat(v, args, pos);
  if (name == "abs") {
    if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.float_value()));
    if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) {
      if (v.integer() == INT64_MIN) Fail("integer result does not fit in 64 bits", pos);
      return Value::Int(std::llabs(v.integer()));
    }
    Fail(std::string("bad operand type for abs(): '") + v.TypeName() + "'", pos);
  }
  if (name == "default" || name == "d") {
    const Value* def = args.Get(0, "default_value");
    const bool boolean = Flag(args, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.Truthy())) return def ? *def : Value::String("");
    return v;
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return SelectItems(v, name, args, pos);
  }
  if (name == "map") return Map(v, args, pos);
  Fail("No filter named '" + std::string(name) + "'", pos);
}

}  // namespace specd::jinja
