// Individual Jinja constructs rendered by ChatTemplate, against expected
// strings taken from the reference, jinja2 as transformers sets it up
// (booleans print "True", none prints "None", lists and dicts print as
// Python repr, `==` compares by value). differential_test.cc checks
// many more constructs against the reference itself.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/chat_template.h"

namespace specd {
namespace {

using Json = nlohmann::ordered_json;

std::string R(const std::string& src, const Json& vars = Json::object()) {
  auto t = ChatTemplate::Create(src, {"<s>", "</s>"});
  if (!t.ok()) return "CREATE ERROR: " + t.status().message();
  Json messages = vars.contains("messages") ? vars["messages"] : Json::array();
  auto r = (*t)->Render(messages, vars.value("add_generation_prompt", false), vars);
  if (!r.ok()) return "RENDER ERROR: " + r.status().message();
  return *r;
}

const Json kMsgs = Json::parse(R"({"messages": [
  {"role": "system", "content": "sys"}, {"role": "user", "content": " hi "},
  {"role": "assistant", "content": "yo"}]})");

TEST(JinjaRender, TextAndWhitespaceControl) {
  EXPECT_EQ(R("plain text\n"), "plain text");  // one trailing newline dropped
  EXPECT_EQ(R("a\n\n"), "a\n");
  EXPECT_EQ(R("a {{- ' b ' -}} c"), "a b c");
  EXPECT_EQ(R("x\n  {% if true %}\n    y\n  {% endif %}\nz"), "x\n    y\nz");  // trim + lstrip blocks
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("a {# note #} b"), "a  b");
  EXPECT_EQ(R("a {#- note -#}\n b"), "ab");
  EXPECT_EQ(R("  {{ 'x' }}"), "  x");  // lstrip_blocks leaves expressions alone
  EXPECT_EQ(R("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(JinjaRender, LoopsAndLoopVariables) {
  EXPECT_EQ(R("{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}"
              "{% if not loop.last %},{% endif %}{% endfor %}", kMsgs),
            "1/3:system,2/3:user,3/3:assistant");
  EXPECT_EQ(R("{% for m in messages %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }} {% endfor %}", kMsgs),
            "03True 12False 21False ");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for m in messages if m.role != 'system' %}{{ m.role }}{{ loop.index }} {% endfor %}", kMsgs),
            "user1 assistant2 ");
  EXPECT_EQ(R("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}"
              "{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(R("{% for k in {'z': 1, 'a': 2} %}{{ k }}{% endfor %}"), "za");  // insertion order
  EXPECT_EQ(R("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}"), "3 7 ");
  EXPECT_EQ(R("{% for i in range(2, 9, 3) %}{{ i }}{% endfor %}{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}"),
            "258321");
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");  // loop scope
  EXPECT_EQ(R("{{ loop }}"), "");
}

TEST(JinjaRender, ConditionsAndSet) {
  EXPECT_EQ(R("{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}"), "c");
  EXPECT_EQ(R("{% if {} or [] or none %}y{% else %}n{% endif %}"), "n");
  EXPECT_EQ(R("{% set a, b = 1, 'two' %}{{ a }}{{ b }}"), "1two");
  EXPECT_EQ(R("{% set block %}in {{ 'side' }}{% endset %}[{{ block }}]"), "[in side]");
  EXPECT_EQ(R("{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
              "{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }} {{ ns.s }}", kMsgs),
            "3 sua");
  EXPECT_EQ(R("{{ 'yes' if messages else 'no' }}|{{ 'a' if false }}|", kMsgs), "yes||");
}

TEST(JinjaRender, MacrosAndCallBlocks) {
  EXPECT_EQ(R("{% macro tag(name, open=true) %}<{{ '' if open else '/' }}{{ name }}>{% endmacro %}"
              "{{ tag('a') }}{{ tag('a', open=false) }}"),
            "<a></a>");
  EXPECT_EQ(R("{% macro wrap(x) %}[{{ caller() }}{{ x }}]{% endmacro %}{% call wrap(1) %}body{% endcall %}"),
            "[body1]");
  EXPECT_EQ(R("{% macro m() %}{{ varargs|length }}{{ kwargs.k }}{% endmacro %}{{ m(1, 2, k='v') }}"), "2v");
  EXPECT_NE(R("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}").find("takes not more than 1 argument"),
            std::string::npos);
}

TEST(JinjaRender, LiteralsIndexingSlicing) {
  EXPECT_EQ(R("{{ messages[0].content }}{{ messages[-1]['role'] }}{{ messages[1:]|length }}", kMsgs), "sysassistant2");
  EXPECT_EQ(R("{{ [1, 2, 3, 4][::-1] }} {{ [1, 2, 3, 4][1:3] }} {{ [1, 2, 3][:-1] }}"), "[4, 3, 2, 1] [2, 3] [1, 2]");
  EXPECT_EQ(R("{{ 'héllo'[1:4] }}{{ 'abc'[-1] }}{{ 'abc'[::-1] }}"), "éllccba");
  EXPECT_EQ(R("{{ {'a': [1, {'b': none}], 'c': 'x'} }}"), "{'a': [1, {'b': None}], 'c': 'x'}");
  EXPECT_EQ(R("{{ 'a' 'b' }}{{ \"q\\\"\\n\" }}{{ '\\u00e9\\x41' }}"), "abq\"\néA");
  EXPECT_EQ(R("{{ true }} {{ false }} {{ none }}|{{ 2.0 }} {{ 2.5 }} {{ -3 }} {{ 7 // 2 }}"),
            "True False None|2.0 2.5 -3 3");
  EXPECT_EQ(R("{{ True }}{{ None }}{{ False }}"), "TrueNoneFalse");
}

TEST(JinjaRender, OperatorsAndTests) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1.5 + 1 }}"),
            "7 9 3.5 3 2 1024 2.5");
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ 2.0 ~ none_var }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}"), "a12.0|ab|[1, 2]");
  EXPECT_EQ(R("{{ 'ell' in 'hello' }} {{ 'x' not in 'hello' }} {{ 2 in [1, 2] }} {{ 'role' in messages[0] }}", kMsgs),
            "True True True True");
  EXPECT_EQ(R("{{ 1 < 2 and 2 <= 2 and not 3 > 4 }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ x or 'dflt' }}"),
            "True True False dflt");
  EXPECT_EQ(R("{{ x is defined }}{{ messages is defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}"
              "{{ [] is iterable }}{{ 'a' is iterable }}{{ 3 is number }}{{ 3 is integer }}{{ 3.0 is integer }}"
              "{{ 3 is odd }}{{ x is not defined }}{{ true is boolean }}{{ false is false }}",
              kMsgs),
            "FalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(R("{{ x is undefined }}|{{ messages[9] is defined }}", kMsgs), "True|False");
  EXPECT_EQ(R("{{ x.y.z }}"), "RENDER ERROR: chat template:1:6: 'x' is undefined");
  EXPECT_EQ(R("{% set a = [1] %}{% set b = [1] %}{{ a == b }} {{ a == a }}"), "True True");  // by value
}

TEST(JinjaRender, Filters) {
  EXPECT_EQ(R("{{ messages[1].content|trim }}|{{ ' x '|length }}|{{ 'aBc'|upper }}{{ 'aBc'|lower }}", kMsgs),
            "hi|3|ABCabc");
  EXPECT_EQ(R("{{ 'hello world'|title }} {{ 'hELLO'|capitalize }} {{ 'a-b-a'|replace('a', 'x') }}"
              " {{ 'aaa'|replace('a', 'b', 2) }}"),
            "Hello World Hello x-b-x bba");
  EXPECT_EQ(R("{{ [1, 'a', none]|join(', ') }}|{{ ['x', 'y']|join }}|{{ [3, 1, 2]|first }}{{ [3, 1, 2]|last }}"),
            "1, a, None|xy|32");
  EXPECT_EQ(R("{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ 5|string }}{{ '7'|int + 1 }}"),
            "d  d 58");
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1, 2]}|tojson }}"), "{\"b\": 1, \"a\": [1, 2]}");
  EXPECT_EQ(R("{{ {'b': 1, 'a': [1, 2], 'e': {}}|tojson(indent=2) }}"),
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ],\n  \"e\": {}\n}");
  EXPECT_EQ(R("{{ 'é\"\\n'|tojson }} {{ 'é'|tojson(ensure_ascii=true) }} {{ 2.0|tojson }} {{ none|tojson }}"),
            "\"é\\\"\\n\" \"\\u00e9\" 2.0 null");
  EXPECT_NE(R("{{ x|tojson }}").find("not JSON serializable"), std::string::npos);
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}"), "{\"a\":2,\"b\":1}");
  EXPECT_EQ(R("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}"
              "{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|join(',') }}",
              kMsgs),
            "[' hi ']system,assistant");
  EXPECT_EQ(R("{{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 1, 2]|unique|list }}"
              " {{ [1, 2]|reverse|list }}"),
            "['A', 'b', 'c'] [3, 2, 1] [1, 2] [2, 1]");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'k': 'v'}|items|list }} {{ [1, 0, 2]|select|list }}"
              " {{ ['a', 'code', 'b']|reject('equalto', 'code')|join }}"),
            "[('a', 2), ('b', 1)] [('k', 'v')] [1, 2] ab");
  EXPECT_EQ(R("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'x'|safe }}"), "a\n  b\n\n  c|  a\n  b|x");
  EXPECT_EQ(R("{% filter upper %}shout {{ 'it' }}{% endfilter %}"), "SHOUT IT");
}

TEST(JinjaRender, MethodsOnStringsAndDicts) {
  EXPECT_EQ(R("{{ '  a b  '.strip() }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'x  '.rstrip() }}|"
              "{{ '<think>a</think>b'.split('</think>')[-1] }}|{{ 'a  b c'.split() }}|{{ 'a,b,c'.split(',', 1) }}"),
            "a b|x\n|x|b|['a', 'b', 'c']|['a', 'b,c']");
  EXPECT_EQ(R("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'aXa'.replace('a', '') }}"
              "{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}"),
            "TrueTrueXABab");
  EXPECT_EQ(R("{{ messages[0].get('role') }} {{ messages[0].get('nope', 'd') }} {{ messages[0].get('nope') }}|"
              "{{ messages[0].keys()|list }} {{ messages[0].values()|list }}",
              kMsgs),
            "system d None|['role', 'content'] ['system', 'sys']");
  EXPECT_EQ(R("{{ 'héllo wörld'.upper() }} {{ 'ÀÉ'|lower }}"), "HÉLLO WÖRLD àé");
}

TEST(JinjaRender, RaiseExceptionAndRuntimeErrors) {
  EXPECT_EQ(R("{{ raise_exception('Bad role: ' + messages[0].role) }}", kMsgs), "RENDER ERROR: Bad role: system");
  EXPECT_EQ(R("{{ x + 1 }}"), "RENDER ERROR: chat template:1:6: 'x' is undefined");
  EXPECT_NE(R("{{ 'abc' + [1] }}").find("can only concatenate str"), std::string::npos);
  EXPECT_NE(R("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_EQ(R("{% for c in 'abc' %}{{ c }}.{% endfor %}"), "a.b.c.");
  EXPECT_NE(R("{% for c in none %}{% endfor %}").find("'NoneType' object is not iterable"), std::string::npos);
}

}  // namespace
}  // namespace specd
