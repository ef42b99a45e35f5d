// ChatTemplate: the interpreter against Python Jinja2 (configured as Hugging
// Face transformers configures it) on real chat templates and on unit cases,
// whitespace control, errors with line numbers, limits, hostile contents, and
// hostile templates (each stopped by a budget, a deadline or a cancel check).
// Fixtures: tests/serve/chat_templates (make.mjs writes them; see its header).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "weft/core/error.h"
#include "weft/serve/chat_template.h"

namespace {

using weft::Error;
using weft::ErrorKind;
using weft::serve::builtin_chat_template;
using weft::serve::builtin_chat_template_names;
using weft::serve::ChatTemplate;
using weft::serve::ChatTemplateLimits;
using weft::serve::RenderControl;
using Json = nlohmann::ordered_json;

const std::string kFixtures = WEFT_SOURCE_DIR "/tests/serve/chat_templates/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string render(std::string_view source, const Json& vars = Json::object()) {
  return ChatTemplate::parse(source).render(vars);
}

// Expects parse or render to throw Error of `kind` whose message contains `needle`.
void expect_error(std::string_view source, const Json& vars, ErrorKind kind, const std::string& needle) {
  try {
    std::string out = render(source, vars);
    ADD_FAILURE() << "no error for " << source << ", rendered: " << out;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what() << "\nwanted: " << needle;
    EXPECT_EQ(std::string(e.what()).rfind("[chat_template] ", 0), 0u) << e.what();
  }
}

// Expects tpl.render(vars, control) to throw Error of `kind` whose message contains `needle`.
void expect_render_error(const ChatTemplate& tpl, const RenderControl& control, ErrorKind kind,
                         const std::string& needle, const Json& vars = Json::object()) {
  try {
    std::string out = tpl.render(vars, control);
    ADD_FAILURE() << "no error; rendered " << out.size() << " bytes: " << out.substr(0, 200);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nwanted: " << needle;
  }
}

ChatTemplate with_limits(std::string_view source, const ChatTemplateLimits& limits) {
  ChatTemplate tpl = ChatTemplate::parse(source);
  tpl.set_limits(limits);
  return tpl;
}

struct TemplateCase {
  const char* source;
  const char* variables;
  const char* expected;
};

// Expected values rendered by Python Jinja2 3.1 in transformers' configuration
// (tests/serve/chat_templates/render_jinja2.py).
const TemplateCase kUnitCases[] = {
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -2 ** 2 "
     "}}",
     R"json({})json", "7 9 3 -4 2 3.5 1024 4"},
    {"{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.0 }} {{ 1e-5 }} {{ 2.5e-3 }} {{ 123456789.125 }} {{ 1 / 3 }}", R"json({})json",
     "0.30000000000000004 1e+16 1.0 1e-05 0.0025 123456789.125 0.3333333333333333"},
    {"{{ 'a' ~ 1 ~ none ~ true ~ undefined_name }}|{{ 'x' + 'y' }}|{{ [1] + [2, 3] }}|{{ 'ab' * 3 }}", R"json({})json",
     "a1NoneTrue|xy|[1, 2, 3]|ababab"},
    {"{{ 1 < 2 }} {{ 'b' > 'a' }} {{ 1 == 1.0 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ "
     "none == none }} {{ 1 != 2 }}",
     R"json({})json", "True True True True True True True True"},
    {"{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [3] }}",
     R"json({})json", "True True True True False"},
    {"{{ 'yes' if x else 'no' }} {{ 'yes' if not x else 'no' }} [{{ 'only' if false }}]", R"json({"x": true})json",
     "yes no []"},
    {"{{ x and y }} {{ x or y }} {{ 0 or 'd' }} {{ '' and 'never' }} {{ not 0 }}", R"json({"x": 1, "y": "b"})json",
     "b 1 d  True"},
    {"{{ [1, 'a', none, true, 1.5, {'k': \"v'q\"}] }} {{ {'a': [1, 2]} }} {{ ('t', 1) }}", R"json({})json",
     "[1, 'a', None, True, 1.5, {'k': \"v'q\"}] {'a': [1, 2]} ('t', 1)"},
    {"{{ s[1:3] }} {{ s[::-1] }} {{ s[-2:] }} {{ s[:-1] }} {{ s[::2] }} {{ l[1:] }} {{ l[::-1] }} {{ l[-1] }} {{ s[0] "
     "}}",
     R"json({"s": "héllo", "l": [1, 2, 3]})json", "él olléh lo héll hlo [2, 3] [3, 2, 1] 3 h"},
    {"{{ \"a\\tb\\n\" }}|{{ 'it\\'s' }}|{{ '\\u00e9\\x41' }}|{{ 'con' 'cat' }}", R"json({})json",
     "a\tb\n|it's|éA|concat"},
    {"{{ m.content }} {{ m['role'] }} {{ m.missing }} {{ m.missing is defined }} {{ l.0 }}",
     R"json({"m": {"role": "user", "content": "hi"}, "l": ["z"]})json", "hi user  False z"},
    {"{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} "
     "{{ d.get('zz') }}",
     R"json({"d": {"a": 1, "b": "two"}})json", "[('a', 1), ('b', 'two')] ['a', 'b'] [1, 'two'] 1 dflt None"},
    {"{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'Hello' | upper }}|{{ 'Hello' | lower }}|{{ \"hello it's-me "
     "(ok)\" | title }}|{{ 'hELLO wORLD' | capitalize }}",
     R"json({})json", "x|hi|HELLO|hello|Hello It's-Me (Ok)|Hello world"},
    {"{{ [1, 2, 3] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ undefined_name | length }} {{ [3, 1] | "
     "first }} {{ [3, 1] | last }} {{ 'abc' | first }}",
     R"json({})json", "3 5 1 0 3 1 a"},
    {"{{ ['a', 'b'] | join(', ') }}|{{ [1, 2] | join }}|{{ users | join(', ', attribute='name') }}|{{ users | "
     "map(attribute='name') | list }}",
     R"json({"users": [{"name": "ann"}, {"name": "bob"}]})json", "a, b|12|ann, bob|['ann', 'bob']"},
    {"{{ missing | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | d('x', "
     "boolean=true) }}|{{ 0 | d(5) }}",
     R"json({})json", "d||d|x|0"},
    {"{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'abc' | list }} {{ {'x': 1, 'y': 2} | "
     "list }} {{ 42 | string }} {{ [1] | string }}",
     R"json({})json", "a+b+c bba ['a', 'b', 'c'] ['x', 'y'] 42 [1]"},
    {"{{ '42' | int }} {{ ' 7 ' | int }} {{ 'x' | int }} {{ 'x' | int(3) }} {{ 3.9 | int }} {{ '2.5' | int }} {{ '2.5' "
     "| float }} {{ 4 | float }} {{ -3 | abs }} {{ -2.5 | abs }}",
     R"json({})json", "42 7 0 3 3 2 2.5 4.0 3 2.5"},
    {"{{ d | items | list }} {% for k, v in d | items %}{{ k }}={{ v }};{% endfor %} {{ d | dictsort }}",
     R"json({"d": {"b": 1, "a": 2}})json", "[('b', 1), ('a', 2)] b=1;a=2; [('a', 2), ('b', 1)]"},
    {"{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }} {{ ms | rejectattr('role', "
     "'equalto', 'user') | list | length }} {{ ms | selectattr('flag') | list | length }}",
     R"json({"ms": [{"role": "user", "c": 1}, {"role": "assistant", "c": 2, "flag": true}, {"role": "user", "c": 3}]})json",
     "[1, 3] 1 1"},
    {"{{ [1, 2, 3, 4] | select('even') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ ['a', 'b', 'c'] | "
     "reject('equalto', 'b') | list }} {{ [1, 5, 10] | select('gt', 4) | list }}",
     R"json({})json", "[2, 4] [2, 4] ['a', 'c'] [5, 10]"},
    {"{{ ['A', 'a', 'b', 'B', 'c'] | unique | list }} {{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ "
     "['b', 'A', 'c'] | sort }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }}",
     R"json({})json", "['A', 'b', 'c'] [1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] [2, 1] cba"},
    {"{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'x' | "
     "indent('> ', first=true) }}",
     R"json({})json", "a\n    b\n\n    c|  a\n  b|a\n  \n  b|> x"},
    {"{{ '<a href=\"x\">&\\'</a>' | e }} {{ '<b>' | safe }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | "
     "round(0, 'ceil') }} {{ ['x', 'y'] | map('upper') | list }}",
     R"json({})json", "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt; <b> 2.0 3.14 3.0 ['X', 'Y']"},
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ 'é\"\\n' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ "
     "{'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ x | tojson(separators=(',', ':')) }}",
     R"json({"x": {"a": [1, 2.0, null, true], "b": {}, "c": [], "d": "s"}})json",
     "{\"a\": [1, 2.0, null, true], \"b\": {}, \"c\": [], \"d\": \"s\"}|{\n  \"a\": [\n    1,\n    2.0,\n    null,\n   "
     " true\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": \"s\"\n}|\"é\\\"\\n\"|\"\\u00e9\"|{\"a\": 2, \"b\": "
     "1}|{\"a\":[1,2.0,null,true],\"b\":{},\"c\":[],\"d\":\"s\"}"},
    {"{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} {{ 1 is number }} {{ 1.5 is "
     "number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.5 is float }}",
     R"json({"x": 1})json", "True True True True True True True True False True"},
    {"{{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 's' is iterable }} {{ 1 is iterable }} {{ 's' is "
     "sequence }} {{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ 1 is true }} {{ false is false }}",
     R"json({})json", "True False True True False True True False True False True"},
    {"{{ 2 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'a' is eq 'a' }} {{ 1 is lt "
     "2 }} {{ 2 is in [1, 2] }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ x is not none }} {{ range is callable }}",
     R"json({"x": 1})json", "True True True False True True True True True True True"},
    {"{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nt\\n'.lstrip('\\n') }}|{{ 'abc  '.rstrip() }}|{{ "
     "'héllo'.strip('oh') }}",
     R"json({})json", "a b|a|t\n|abc|éll"},
    {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }} {{ "
     "'abc'.endswith('x') }} {{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ "
     "'a,b,c'.rsplit(',', 1) }} {{ ' a b c '.split(none, 1) }}",
     R"json({})json",
     "True True True False ['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a,b', 'c'] ['a', 'b c ']"},
    {"{{ 'aXbXc'.replace('X', '-') }} {{ 'hello world'.title() }} {{ \"it's\".title() }} {{ 'hELLO'.capitalize() }} {{ "
     "'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ "
     "', '.join(['a', 'b']) }}",
     R"json({})json", "a-b-c Hello World It'S Hello ABC abc 2 -1 2 a, b"},
    {"{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ "
     "c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
     R"json({"c": "<think>\nreason\n</think>\n\nanswer"})json", "answer|reason"},
    {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ "
     "loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}",
     R"json({"xs": ["a", "b", "c"]})json", "1032TrueFalse3b;2121FalseFalse3ac;3210FalseTrue3b;"},
    {"{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|{% for x in [] "
     "%}x{% else %}empty{% endfor %}",
     R"json({"xs": [1, 2, 3]})json", "2:1/2 3:2/2 |empty"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'hé' "
     "%}[{{ c }}]{% endfor %}",
     R"json({"d": {"a": 1, "b": 2}})json", "a=1 b=2 |ab|[h][é]"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% "
     "endfor %} {{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(3, 0, -1) | list }}",
     R"json({})json", "0134 [0, 1, 2] [1, 4, 7] [3, 2, 1]"},
    {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}|{% if true %}{% set y = 5 "
     "%}{% endif %}{{ y }}",
     R"json({})json", "23|1|5"},
    {"{% set ns = namespace(total=0, seen=false) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set "
     "ns.seen = true %}{% endfor %}{{ ns.total }} {{ ns.seen }} {{ ns.missing is defined }}",
     R"json({})json", "6 True False"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}|{% set block %}inner {{ a }}{% endset %}[{{ block }}]|{% set t = 'x' %}{{ "
     "t }}",
     R"json({})json", "12|[inner 1]|x"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('ann') }} {{ greet('bob', '?') "
     "}} {{ greet(name='cy', punct='.') }} {{ greet('d') | upper }}",
     R"json({})json", "Hi ann! Hi bob? Hi cy. HI D!"},
    {"{% macro m() %}{{ outer }}{% endmacro %}{% set outer = 'seen' %}{{ m() }}{% macro rec(n) %}{{ n }}{% if n > 0 "
     "%}{{ rec(n - 1) }}{% endif %}{% endmacro %} {{ rec(3) }}",
     R"json({})json", "seen 3210"},
    {"a{# a comment #}b{% raw %}{{ not parsed }}{% if %}{% endraw %}c", R"json({})json", "ab{{ not parsed }}{% if %}c"},
    {"a  \n  {% if true %}\n  b\n{% endif %}\nc\n", R"json({})json", "a  \n  b\nc"},
    {"<{%- if true -%}  x  {%- endif -%}>\n<{{- ' y ' -}}>\n<  {{ 'z' }}  >", R"json({})json", "<x>\n< y >\n<  z  >"},
    {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", R"json({})json", "  1\n  2\n"},
    {"  {%+ if true %}x{% endif +%}\nend", R"json({})json", "  x\nend"},
    {"line1\n    {# comment #}\nline2\n  {%- set x = 1 %}\nline3  {{ x }}  \n", R"json({})json",
     "line1\nline2line3  1  "},
    {"{% if true %}\r\nwin\r\n{% endif %}\r\n", R"json({})json", "win\n"},
    {"{{ x }}\n\n", R"json({"x": 1})json", "1\n"},
    {"[{{ nope }}][{{ none.attr }}][{{ l[5] }}][{{ nope is defined }}][{{ 'x' if nope else 'falsy' }}][{% for i in "
     "nope %}{{ i }}{% endfor %}]",
     R"json({"l": [1]})json", "[][][][False][falsy][]"},
};

TEST(ChatTemplate, UnitCasesMatchJinja2) {
  for (const TemplateCase& c : kUnitCases) {
    SCOPED_TRACE(c.source);
    try {
      EXPECT_EQ(render(c.source, Json::parse(c.variables)), c.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(ChatTemplate, RealTemplatesMatchJinja2) {
  Json cases = Json::parse(read_file(kFixtures + "cases.json"));
  std::map<std::string, ChatTemplate> templates;
  std::size_t rendered = 0, raised = 0;
  for (const auto& c : cases) {
    std::string family = c["template"];
    SCOPED_TRACE(family + "/" + c["name"].get<std::string>());
    if (!templates.count(family)) templates.emplace(family, ChatTemplate::parse(read_file(kFixtures + family + ".jinja")));
    const ChatTemplate& tpl = templates.at(family);
    if (c.contains("expected")) {
      try {
        EXPECT_EQ(tpl.render(c["variables"]), c["expected"].get<std::string>());
        ++rendered;
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
    } else {
      try {
        ADD_FAILURE() << "rendered without error: " << tpl.render(c["variables"]);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
        EXPECT_NE(std::string(e.what()).find(c["expected_error_substring"].get<std::string>()), std::string::npos) << e.what();
        ++raised;
      }
    }
  }
  EXPECT_EQ(templates.size(), 12u);
  EXPECT_GE(rendered, 140u);
  EXPECT_GE(raised, 10u);
}

// Each builtin renders as the real template of its family wherever that one
// renders, and raises wherever it raises.
TEST(ChatTemplate, BuiltinsMatchRealTemplates) {
  const std::pair<const char*, const char*> pairs[] = {{"chatml", "chatml"}, {"llama2", "llama2"}, {"llama3", "llama3"},
                                                        {"mistral", "mistral"}, {"gemma", "gemma3"}, {"gemma", "gemma2"},
                                                        {"phi3", "phi3"}};
  Json cases = Json::parse(read_file(kFixtures + "cases.json"));
  for (const auto& [builtin, family] : pairs) {
    std::optional<std::string> source = builtin_chat_template(builtin);
    ASSERT_TRUE(source) << builtin;
    ChatTemplate tpl = ChatTemplate::parse(*source);
    int checked = 0;
    for (const auto& c : cases) {
      if (c["template"] != family || c["variables"].contains("tools")) continue;
      SCOPED_TRACE(std::string(builtin) + " vs " + family + "/" + c["name"].get<std::string>());
      if (c.contains("expected")) {
        EXPECT_EQ(tpl.render(c["variables"]), c["expected"].get<std::string>());
        ++checked;
      } else if (std::string(family) != "gemma2") {  // gemma2 refuses system messages; the builtin folds them in as Gemma 3 does
        EXPECT_THROW(tpl.render(c["variables"]), Error);
      }
    }
    EXPECT_GE(checked, 6) << builtin;
  }
}

TEST(ChatTemplate, BuiltinNames) {
  EXPECT_EQ(builtin_chat_template_names(), "chatml, gemma, llama2, llama3, mistral, phi3");
  EXPECT_FALSE(builtin_chat_template("llama4"));
  EXPECT_FALSE(builtin_chat_template(""));
}

TEST(ChatTemplate, ContentsAreNeverTemplates) {
  const std::string hostile = "{{ 7*7 }} {% raise_exception('x') %} {% for i in range(99999999) %}{% endfor %} {# c #} {%- raw %}";
  Json vars = {{"messages", Json::array({{{"role", "user"}, {"content", hostile}}})}, {"add_generation_prompt", false}};
  EXPECT_EQ(render(*builtin_chat_template("chatml"), vars), "<|im_start|>user\n" + hostile + "<|im_end|>\n");
  EXPECT_EQ(render("{{ x }}|{{ x | tojson }}", {{"x", "{{ 1 }}"}}), "{{ 1 }}|\"{{ 1 }}\"");
}

TEST(ChatTemplate, UndefinedIsLenient) {
  // Jinja2 raises for an attribute of an undefined value; weft renders it as
  // undefined too (documented in the header), and calling one is an error.
  EXPECT_EQ(render("[{{ nope.attr }}][{{ nope['k'].x }}][{{ nope.a is defined }}]"), "[][][False]");
  EXPECT_EQ(render("[{{ messages[0].role }}]", {{"messages", Json::array()}}), "[]");
  expect_error("{{ nope() }}", {}, ErrorKind::unsupported, "'nope' is undefined");
  expect_error("{{ nope + 1 }}", {}, ErrorKind::invalid_input, "unsupported operand types for +");
}

// A float where an integer is wanted is the template's type error (it once
// escaped as std::bad_variant_access, a 500); INT64_MIN divisible by -1 is
// true, not a trap.
TEST(ChatTemplate, FloatsWhereIntegersAreWantedAreTypeErrors) {
  expect_error("{{ 2.5|round(1.5) }}", {}, ErrorKind::invalid_input, "an integer is needed here, not a float");
  expect_error("{{ 'a\nb'|indent(2.5) }}", {}, ErrorKind::invalid_input, "an integer is needed here, not a float");
  expect_error("{{ 4 is divisibleby 2.0 }}", {}, ErrorKind::invalid_input, "an integer is needed here, not a float");
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }}"), "True");
}

TEST(ChatTemplate, GenerationBlockRendersItsBody) {
  EXPECT_EQ(render("a{% generation %}g{{ 1 }}{% endgeneration %}b"), "ag1b");
}

TEST(ChatTemplate, ObjectsKeepTheCallersOrder) {
  std::string src = "{{ x | tojson }} {% for k in x %}{{ k }}{% endfor %}";
  Json ordered = Json::parse(R"({"x": {"b": 1, "a": 2}})");
  EXPECT_EQ(ChatTemplate::parse(src).render(ordered), "{\"b\": 1, \"a\": 2} ba");
  EXPECT_EQ(ChatTemplate::parse(src).render(nlohmann::json::parse(R"({"x": {"b": 1, "a": 2}})")), "{\"a\": 2, \"b\": 1} ab");
}

// gpt-oss's "harmony" template (gpt_oss.jinja, the standard engine's copy of
// OpenAI's) against Python Jinja2 and @huggingface/jinja (make_gpt_oss.mjs):
// system, developer, user and assistant turns, reasoning effort and model
// identity, thinking kept on a last assistant turn and dropped before,
// tools as a TypeScript namespace, a tool call and its result, and the
// template's own raise_exception. The clock is the date the fixtures hold.
TEST(ChatTemplate, GptOssHarmonyMatchesJinja2) {
  ChatTemplate tpl = ChatTemplate::parse(read_file(kFixtures + "gpt_oss.jinja"));
  std::tm tm{};
  tm.tm_year = 2031 - 1900;
  tm.tm_mon = 5;
  tm.tm_mday = 15;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  tpl.set_clock([t = std::chrono::system_clock::from_time_t(std::mktime(&tm))] { return t; });
  const Json cases = Json::parse(read_file(kFixtures + "gpt_oss_cases.json"));
  int rendered = 0, raised = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    if (c.contains("expected")) {
      try {
        EXPECT_EQ(tpl.render(c["variables"]), c["expected"].get<std::string>());
        ++rendered;
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
    } else {
      try {
        ADD_FAILURE() << "rendered without error: " << tpl.render(c["variables"]);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
        EXPECT_NE(std::string(e.what()).find(c["expected_error_substring"].get<std::string>()), std::string::npos)
            << e.what();
        ++raised;
      }
    }
  }
  EXPECT_EQ(rendered, 9);
  EXPECT_EQ(raised, 1);
}

TEST(ChatTemplate, StrftimeNowReadsTheClock) {
  ChatTemplate tpl = ChatTemplate::parse("{{ strftime_now('%Y') }}|{{ strftime_now is defined }}");
  std::tm tm{};
  tm.tm_year = 2031 - 1900;
  tm.tm_mon = 5;
  tm.tm_mday = 15;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  tpl.set_clock([t = std::chrono::system_clock::from_time_t(std::mktime(&tm))] { return t; });
  EXPECT_EQ(tpl.render(Json::object()), "2031|True");
  // Llama 3.2 dates its system header with strftime_now when no date_string is given.
  ChatTemplate llama = ChatTemplate::parse(read_file(kFixtures + "llama3_2.jinja"));
  llama.set_clock([t = std::chrono::system_clock::from_time_t(std::mktime(&tm))] { return t; });
  std::string out = llama.render(Json{{"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}});
  EXPECT_NE(out.find("Today Date: 15 Jun 2031\n"), std::string::npos) << out;
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  expect_error("a\nb\n{{ 1 + }}", {}, ErrorKind::invalid_input, "line 3: unexpected '}}'");
  expect_error("{% if x %}\nopen", {}, ErrorKind::invalid_input, "line 1: missing {% endif %}");
  expect_error("\n\n{{ 'abc }}", {}, ErrorKind::invalid_input, "line 3: unterminated string");
  expect_error("{{ x", {}, ErrorKind::invalid_input, "line 1: unterminated tag");
  expect_error("{% for x in y %}{% endif %}", {}, ErrorKind::invalid_input, "line 1: unexpected {% endif %}");
  expect_error("{# open", {}, ErrorKind::invalid_input, "unterminated comment");
  expect_error("{{ a $ b }}", {}, ErrorKind::invalid_input, "unexpected character '$'");
  expect_error("{{ 99999999999999999999 }}", {}, ErrorKind::invalid_input, "out of range");
}

TEST(ChatTemplate, UnsupportedConstructsAreNamed) {
  expect_error("\n{% include 'x' %}", {}, ErrorKind::unsupported, "line 2: statement not supported: {% include %}");
  expect_error("{% extends 'x' %}", {}, ErrorKind::unsupported, "{% extends %}");
  expect_error("{{ x | wordcount }}", {}, ErrorKind::unsupported, "line 1: filter not supported: wordcount");
  expect_error("{{ x is prime }}", {}, ErrorKind::unsupported, "test not supported: prime");
  expect_error("{% for x in y recursive %}{% endfor %}", {}, ErrorKind::unsupported, "recursive");
  expect_error("{{ 1 < 2 < 3 }}", {}, ErrorKind::unsupported, "chained comparisons");
  expect_error("{{ '{}'.format(1) }}", {}, ErrorKind::unsupported, "string method not supported: format");
  expect_error("{% set l = [] %}{{ l.append(1) }}", {}, ErrorKind::unsupported, "list method not supported");
  expect_error("{{ cycler(1) }}", {}, ErrorKind::unsupported, "'cycler' is undefined");
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  expect_error("a\n{% if true %}\n{{ raise_exception('roles must alternate') }}{% endif %}", {}, ErrorKind::invalid_input,
               "line 3: roles must alternate");
  expect_error("\n{{ 'a' + 1 }}", {}, ErrorKind::invalid_input, "line 2: unsupported operand types for +: 'str' and 'int'");
  expect_error("{{ 1 // 0 }}", {}, ErrorKind::invalid_input, "division or modulo by zero");
  expect_error("{{ 9223372036854775807 + 1 }}", {}, ErrorKind::invalid_input, "integer overflow");
  expect_error("{% for x in 5 %}{% endfor %}", {}, ErrorKind::invalid_input, "'int' object is not iterable");
  expect_error("{% set x = 1 %}{% set x.a = 2 %}", {}, ErrorKind::invalid_input, "only namespace() objects");
  expect_error("{{ x | tojson }}", {}, ErrorKind::invalid_input, "not JSON serializable");
  expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}, ErrorKind::invalid_input, "takes 1 arguments");
  expect_error("{% break %}", {}, ErrorKind::invalid_input, "outside a for loop");
  EXPECT_THROW(ChatTemplate::parse("{{ 1 }}").render(nlohmann::json::array()), Error);
}

TEST(ChatTemplate, LimitsFailCleanly) {
  expect_error("{{ range(100000000) | length }}", {}, ErrorKind::out_of_memory, "range() longer than");
  expect_error("{{ 'x' * 100000000 }}", {}, ErrorKind::out_of_memory, "longer than the output limit");
  expect_error("{% set ns = namespace(s='abcdefgh') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", {},
               ErrorKind::out_of_memory, "limit");
  expect_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", {}, ErrorKind::out_of_memory, "output longer than");
  expect_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", {}, ErrorKind::out_of_memory, "nest deeper than");
  expect_error("{% set ns = namespace(l=[]) %}{% for i in range(200) %}{% set ns.l = [ns.l] %}{% endfor %}", {},
               ErrorKind::out_of_memory, "nests deeper");
  // Deep templates fail in the parser, not by exhausting the stack.
  expect_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", {}, ErrorKind::out_of_memory, "nests deeper");
  expect_error("{{ " + std::string(100000, '-') + "1 }}", {}, ErrorKind::out_of_memory, "nests deeper");
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  expect_error(sum + " }}", {}, ErrorKind::out_of_memory, "nests deeper");
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  expect_error(ifs, {}, ErrorKind::out_of_memory, "statements nest deeper");
  // Deep input is refused when converted.
  Json deep = Json::array();
  for (int i = 0; i < 1000; ++i) deep = Json::array({deep});
  expect_error("{{ x }}", {{"x", deep}}, ErrorKind::out_of_memory, "nests deeper");
  // Caps are the template's settings.
  ChatTemplate tpl = ChatTemplate::parse("{{ x }}");
  tpl.set_limits({.max_output_bytes = 4});
  EXPECT_EQ(tpl.render(Json{{"x", "1234"}}), "1234");
  EXPECT_THROW(tpl.render(Json{{"x", "12345"}}), Error);
  ChatTemplate loops = ChatTemplate::parse("{% for i in range(20) %}{% for j in range(50) %}{% endfor %}{% endfor %}");
  EXPECT_NO_THROW(loops.render(Json::object()));
  loops.set_limits({.max_loop_iterations = 1000});  // 20 + 20 * 50 iterations in all
  try {
    loops.render(Json::object());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("line 1: more than 1000 loop iterations"), std::string::npos) << e.what();
  }
}

// A macro that calls itself twice per level: 2^41 calls, never deeper than 41.
const char* const kFanOut = "{% macro f(n) %}{{ f(n - 1) ~ f(n - 1) if n > 0 else '' }}{% endmacro %}{{ f(40) }}";

TEST(ChatTemplate, IntegerPowerSquares) {
  EXPECT_EQ(
      render(
          "{{ (-1) ** 1000000000000000000 }} {{ (-1) ** 1000000000000000001 }} {{ 0 ** 1000000000000000000 }} "
          "{{ 1 ** 9223372036854775807 }} {{ 0 ** 0 }} {{ 2 ** 62 }} {{ (-2) ** 63 }} {{ (-3) ** 3 }} {{ 10 ** 18 }}"),
      "1 -1 0 1 1 4611686018427387904 -9223372036854775808 -27 1000000000000000000");
  expect_error("{{ 2 ** 100 }}", {}, ErrorKind::invalid_input, "integer overflow");
  expect_error("{{ 2 ** 63 }}", {}, ErrorKind::invalid_input, "integer overflow");
  expect_error("{{ (-2) ** 64 }}", {}, ErrorKind::invalid_input, "integer overflow");
  expect_error("{{ 3 ** 1000000000000000000 }}", {}, ErrorKind::invalid_input, "integer overflow");
  // A handful of steps however large the exponent.
  EXPECT_EQ(with_limits("{{ (-1) ** 1000000000000000000 }}", {.max_steps = 20}).render(Json::object()), "1");
}

// Templates that would run for hours or years: each ends at the step budget
// (or the loop cap) whatever it spends its time on.
TEST(ChatTemplate, RunawayTemplatesStopAtTheStepBudget) {
  const std::pair<std::string, const char*> cases[] = {
      {kFanOut, "steps"},
      // Eight calls a level, 14 deep.
      {"{% macro f(n) %}{% if n > 0 %}"
       "{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}{{ f(n - 1) }}"
       "{% endif %}{% endmacro %}{{ f(14) }}",
       "steps"},
      // 10^9 iterations (the loop cap, or the steps, whichever comes first).
      {"{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
       "{% endfor %}{% endfor %}{% endfor %}",
       "line 1: more than"},
      // A loop filter tests items without counting loop iterations: 10^9 tests.
      {"{% for j in range(1000) %}{% for i in range(1000000) if i < 0 %}{% endfor %}{% endfor %}", "steps"},
      // == on a list that shares its halves: 2^30 elements compared.
      {"{% set ns = namespace(x=[0]) %}{% for i in range(30) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"
       "{{ ns.x == ns.x }}",
       "steps"},
      // Sorting items that share their halves: 2^23 elements a comparison.
      {"{% set ns = namespace(x=[0]) %}{% for i in range(22) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"
       "{{ [ns.x, ns.x, ns.x, ns.x, ns.x, ns.x, ns.x, ns.x] | sort | length }}",
       "steps"},
      // unique over 200,000 distinct items: each compared with all kept before it.
      {"{{ range(200000) | unique | length }}", "steps"},
      // unique over items that share their halves: 2^23 elements a comparison.
      {"{% set ns = namespace(x=[0]) %}{% for i in range(22) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"
       "{{ [ns.x, [ns.x], ns.x, [ns.x]] | unique | length }}",
       "steps"},
      // `in` over a megabyte, a million times.
      {"{% set s = 'a' * 1000000 %}{% for i in range(1000000) %}{{ 'b' in s }}{% endfor %}", "steps"},
  };
  // The first at the default budget; the rest at a tenth of it, which stops
  // them the same way in a tenth of the time (seconds each under sanitizers).
  bool first = true;
  for (const auto& [source, needle] : cases) {
    SCOPED_TRACE(source);
    if (first) {
      expect_error(source, {}, ErrorKind::out_of_memory, needle);
      first = false;
      continue;
    }
    expect_render_error(with_limits(source, {.max_steps = 2'000'000}), {}, ErrorKind::out_of_memory, needle);
  }
}

TEST(ChatTemplate, StepCounterIsWhatStops) {
  ChatTemplate loop = with_limits("{% for i in range(100) %}{{ i }}{% endfor %}", {.max_steps = 50});
  expect_render_error(loop, {}, ErrorKind::out_of_memory, "line 1: more than 50 steps");
  loop.set_limits({.max_steps = 5000});
  EXPECT_EQ(loop.render(Json::object()).size(), 190u);
  // An operation is charged by the bytes it touches: `in` over 1 MiB takes 1 + 2^20 / 64 steps.
  const Json vars = {{"s", std::string(1 << 20, 'a')}};
  ChatTemplate scan = with_limits("{{ 'b' in s }}", {.max_steps = 16000});
  expect_render_error(scan, {}, ErrorKind::out_of_memory, "more than 16000 steps", vars);
  scan.set_limits({.max_steps = 17000});
  EXPECT_EQ(scan.render(vars), "False");
}

// The real templates take at most ~600 steps on the fixtures (a 200-message,
// 800 KB chat ~62,000): the default budget is thousands of times more.
TEST(ChatTemplate, RealTemplatesTakeFewSteps) {
  Json cases = Json::parse(read_file(kFixtures + "cases.json"));
  std::map<std::string, ChatTemplate> templates;
  for (const auto& c : cases) {
    std::string family = c["template"];
    SCOPED_TRACE(family + "/" + c["name"].get<std::string>());
    if (!templates.count(family))
      templates.emplace(family, with_limits(read_file(kFixtures + family + ".jinja"), {.max_steps = 1000}));
    try {
      std::string out = templates.at(family).render(c["variables"]);
      EXPECT_TRUE(c.contains("expected"));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << e.what();  // the cases that raise, and only them
    }
  }
}

TEST(ChatTemplate, ResultsAreSizedBeforeTheyAreBuilt) {
  // replace('', x) puts x before every character and at the end, as Python does.
  EXPECT_EQ(render("{{ 'abc'.replace('', '-') }}|{{ 'abc'.replace('', '-', 2) }}|{{ 'hé'.replace('', '.') }}|"
                   "{{ ''.replace('', 'x') }}|{{ 'aaa'.replace('a', 'bb') }}|{{ 'abab'.replace('ab', '', 1) }}|"
                   "{{ 'a' | replace('', '-') }}"),
            "-a-b-c-|-a-bc|.h.é.|x|bbbbbb|ab|-a-");
  const std::string grow = "{{ ('x' * 1000000).replace('', 'yyyyyyyy') }}";
  EXPECT_EQ(render(grow).size(), 9'000'008u);  // within the default output limit
  // Under smaller limits it is refused before it is built: the message names
  // the operation and the size it would have had.
  ChatTemplate replace = with_limits(grow, {.max_output_bytes = 4 << 20});
  expect_render_error(replace, {}, ErrorKind::out_of_memory,
                      "replace() would build a string of 9000008 bytes, longer than the output limit (4194304 bytes)");
  replace.set_limits({.max_work_bytes = 8 << 20});
  expect_render_error(replace, {}, ErrorKind::out_of_memory, "replace() would need");
  // At full size: 16 M characters, 144 MB of result (and 16 M strings, once) never built.
  expect_error("{{ ('x' * 16000000).replace('', 'yyyyyyyy') }}", {}, ErrorKind::out_of_memory,
               "replace() would build a string of 144000008 bytes");
  // A string grown by ~ in a loop.
  expect_error(
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ('x' * 100) %}{% endfor %}", {},
      ErrorKind::out_of_memory, "would need");
  // join: refused at the part that would pass the limit, before appending it.
  const std::string twenty =
      "{% set b = 'x' * 1000000 %}{% set l = [b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b] %}";
  expect_error(twenty + "{{ l | join }}", {}, ErrorKind::out_of_memory, "join would build a string of 17000000 bytes");
  expect_error(twenty + "{{ ''.join(l) }}", {}, ErrorKind::out_of_memory,
               "join() would build a string of 20000000 bytes");
  // Printing a list that shares its halves (2^40 elements) stops as its text reaches the limit.
  const std::string shared =
      "{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}";
  expect_error(shared + "{{ ns.x | tojson }}", {}, ErrorKind::out_of_memory, "tojson would be longer than");
  expect_error(shared + "{{ ns.x | tojson(indent=4) }}", {}, ErrorKind::out_of_memory, "tojson would be longer than");
  expect_error(shared + "{{ ns.x }}", {}, ErrorKind::out_of_memory, "the text of a list would be longer than");
  expect_error(shared + "{{ ns.x ~ '' }}", {}, ErrorKind::out_of_memory, "the text of a list would be longer than");
  expect_error(shared + "{{ ns.x | join(',') }}", {}, ErrorKind::out_of_memory,
               "the text of a list would be longer than");
  // Indent sizes its result first.
  ChatTemplate indent = with_limits("{{ s | indent(200) }}", {.max_output_bytes = 1 << 20});
  std::string lines;
  for (int i = 0; i < 100000; ++i) lines += "a\n";
  // 100,000 lines of "a", all but the first padded, and the empty one after the last newline not.
  expect_render_error(indent, {}, ErrorKind::out_of_memory, "indent would build a string of 20199800 bytes",
                      {{"s", lines}});
}

TEST(ChatTemplate, StringsIndexByCharacter) {
  const Json vars = {{"s", "héllo"}};
  EXPECT_EQ(
      render("{{ s[-4] }}|{{ s[1::2] }}|{{ s[-1:-4:-2] }}|{{ s[10] }}|{{ s | first }}{{ s | last }}|{{ 'é' | last }}|"
             "{{ s | reverse }}|{{ s[2:2] }}|{{ s[::-2] }}|{{ [1, 2, 3][::-2] }}|{{ range(10, 0, -3) | list }}",
             vars),
      "é|él|ol||ho|é|olléh||olh|[3, 1]|[10, 7, 4, 1]");
  EXPECT_EQ(render("{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904) | list }}"),
            "[-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]");
  EXPECT_EQ(render("{{ 'a b  c '.split(none, 1) }} {{ ' a b c '.rsplit(none, 1) }} {{ 'a,b,c'.rsplit(',') }} "
                   "{{ 'x\\ny\\r\\nz\\n'.splitlines() }}"),
            "['a', 'b  c '] [' a b', 'c'] ['a', 'b', 'c'] ['x', 'y', 'z']");
}

TEST(ChatTemplate, RenderStopsAtItsDeadline) {
  using namespace std::chrono_literals;
  const auto now = std::chrono::steady_clock::now();
  expect_render_error(ChatTemplate::parse("{{ 'x' }}"), {now - 1s}, ErrorKind::disconnected,
                      "line 1: rendering passed its deadline");
  // One that would run for years, stopped 20 ms from now (long before the step budget).
  ChatTemplate fan_out = ChatTemplate::parse(kFanOut);
  expect_render_error(fan_out, {now + 20ms}, ErrorKind::disconnected, "rendering passed its deadline");
  // Without a deadline the same one ends at the step budget.
  fan_out.set_limits({.max_steps = 100'000});
  expect_render_error(fan_out, {}, ErrorKind::out_of_memory, "more than 100000 steps");
  EXPECT_EQ(ChatTemplate::parse("{{ 1 }}").render(Json::object(), {now + 1h}), "1");
}

TEST(ChatTemplate, RenderStopsWhenCancelled) {
  int calls = 0;
  RenderControl control;
  control.cancelled = [&] { return ++calls == 3; };
  expect_render_error(ChatTemplate::parse(kFanOut), control, ErrorKind::disconnected, "rendering cancelled");
  EXPECT_EQ(calls, 3);
  // Asked every few thousand steps, not at each: ~150,000 steps ask a few dozen times.
  calls = 0;
  control.cancelled = [&] { return ++calls < 0; };
  EXPECT_EQ(
      ChatTemplate::parse("{% for i in range(20000) %}{{ i }}{% endfor %}").render(Json::object(), control).size(),
      88890u);
  EXPECT_GE(calls, 5);
  EXPECT_LE(calls, 100);
}

}  // namespace
