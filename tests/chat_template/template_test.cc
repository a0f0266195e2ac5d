// src/chat_template against the real Jinja2: jinja_cases.json holds
// templates and their renderings by Python Jinja2 as transformers configures
// it (gen_jinja_cases.py; the jinja_golden test re-checks them). Plus the
// failure modes: unsupported constructs fail the parse with the line,
// raise_exception and the render limits fail the render.

#include "chat_template/template.hh"

#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

using ic::chat_template::Dict;
using ic::chat_template::List;
using ic::chat_template::Template;
using ic::chat_template::Value;
using json = nlohmann::ordered_json;  // keeps key order, as Python dicts do

namespace {

Value from_json(const json& j) {
  if (j.is_null()) return Value(ic::chat_template::None{});
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) return Value(j.get<std::int64_t>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (const json& x : j) l.push_back(from_json(x));
    return Value(std::move(l));
  }
  Dict d;
  for (const auto& [k, v] : j.items()) d.emplace_back(k, from_json(v));
  return Value(std::move(d));
}

std::string render(std::string_view source, const Dict& vars = {}) {
  std::string error, out;
  auto t = Template::parse(source, error);
  REQUIRE_MESSAGE(t != nullptr, error);
  REQUIRE_MESSAGE(t->render(vars, out, error), error);
  return out;
}

std::string parse_error(std::string_view source) {
  std::string error;
  CHECK(Template::parse(source, error) == nullptr);
  return error;
}

std::string render_error(std::string_view source, const Dict& variables = {}) {
  std::string error, out;
  auto t = Template::parse(source, error);
  REQUIRE_MESSAGE(t != nullptr, error);
  CHECK_FALSE(t->render(variables, out, error));
  return error;
}

}  // namespace

TEST_CASE("every Jinja2 golden case renders byte for byte") {
  std::ifstream in(IC_CASES_FILE);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const json doc = json::parse(ss.str());
  const Dict vars = from_json(doc["variables"]).as_dict();
  REQUIRE(doc["cases"].size() == 15);
  for (const json& c : doc["cases"]) {
    CAPTURE(c["name"].get<std::string>());
    CHECK(render(c["template"].get<std::string>(), vars) == c["expected"].get<std::string>());
  }
}

TEST_CASE("unsupported constructs fail the parse with their line") {
  CHECK(parse_error("a\n{% include 'x.j2' %}") == "line 2: unsupported statement 'include'");
  CHECK(parse_error("{{ x | frobnicate }}") == "line 1: unsupported filter 'frobnicate'");
  CHECK(parse_error("{{ x is prime }}") == "line 1: unsupported test 'prime'");
  CHECK(parse_error("{% if x %}open") ==
        "line 1: missing end tag (expected one of the block's end tags)");
  CHECK(parse_error("{{ x ") == "line 1: unterminated tag");
  CHECK(parse_error("{{ 'abc }}") == "line 1: unterminated string");
  CHECK(parse_error("{{ x ? y }}") == "line 1: unexpected character '?'");
  CHECK(parse_error("{% for x in y recursive %}{% endfor %}") ==
        "line 1: recursive loops are not supported");
}

TEST_CASE("raise_exception, type errors and limits fail the render, never crash") {
  CHECK(render_error("{{ raise_exception('Conversation roles must alternate') }}") ==
        "line 1: Conversation roles must alternate");
  CHECK(render_error("x\n{{ 'a' + 1 }}") ==
        "line 2: unsupported operand types for +: string and integer");
  // A + chain adds left to right as Jinja2 does: strings joined in one go, the
  // first operand of another type decides from there.
  CHECK(render("{{ 'a' + b + 'c' + 'd' }}", {{"b", Value("B")}}) == "aBcd");
  CHECK(render("{{ 1 + 2 + 3.5 }}|{{ [1] + [2] + [3] }}|{{ (1 + 2) ~ 'x' + 'y' }}") ==
        "6.5|[1, 2, 3]|3xy");
  CHECK(render_error("{{ 'a' + 'b' + 1 + 'c' }}") ==
        "line 1: unsupported operand types for +: string and integer");
  CHECK(render_error("{{ 1 + 2 + 'c' }}") ==
        "line 1: unsupported operand types for +: integer and string");
  CHECK(render_error("{{ 'a' + raise_exception('raised first') + 1 }}") == "line 1: raised first");
  // A parenthesized chain on the left adds as one chain; on the right it is
  // added first, as its own value.
  CHECK(render("{{ ('a' + b) + 'c' }}|{{ 'a' + (b + 'c') }}|{{ (1 + 2) + 3 }}|{{ 1 - 2 + 3 }}",
               {{"b", Value("B")}}) == "aBc|aBc|6|2");
  CHECK(render_error("{{ 'a' + (1 + 2) }}") ==
        "line 1: unsupported operand types for +: string and integer");
  CHECK(render_error("{{ 1 + ('a' + 'b') }}") ==
        "line 1: unsupported operand types for +: integer and string");
  CHECK(render_error("{{ 'a' - 'b' }}") ==
        "line 1: unsupported operand types for -: string and string");
  CHECK(render_error("{{ -'a' }}") == "line 1: bad operand type for unary -");
  CHECK(render_error("{{ 1 // 0 }}") == "line 1: division by zero");
  CHECK(render_error("{% for i in range(200000) %}{% endfor %}") == "line 1: range() too long");
  CHECK(render_error(
            "{% for i in range(1000) %}{% for j in range(1001) %}{% endfor %}{% endfor %}") ==
        "line 1: too many loop iterations");
  CHECK(render_error("{{ 'x' * 10000000 }}") == "line 1: output over 8388608 bytes");
  CHECK(render_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}") ==
        "line 1: macros nested too deeply");
}

TEST_CASE("{{ }} of a string or a + chain writes exactly what str() of its value would") {
  const Dict vars = {{"s", Value("S")},
                     {"n", Value(2)},
                     {"f", Value(1.5)},
                     {"z", Value(ic::chat_template::None{})},
                     {"l", Value(List{Value(1), Value("x")})}};
  // Strings: written operand by operand, in an output statement and after a set.
  CHECK(render("{{ '<' + s + '\\n' + s + '>' }}|{% set x = '<' + s + '>' %}{{ x }}{{ x + s }}",
               vars) == "<S\nS>|<S><S>S");
  CHECK(render("{{ s }}{{ '' + '' + '' }}{{ s + '' }}", vars) == "SS");
  // Other operands: numbers add, lists join, and the result is written as str().
  CHECK(render("{{ n + n + f }}|{{ n + 1 }}|{{ l + l + [none] }}|{{ z }}|{{ undefined_name }}",
               vars) == "5.5|3|[1, 'x', 1, 'x', None]|None|");
  // Mixed: the first operand that cannot be added fails the render, as Jinja2.
  CHECK(render_error("{{ s + s + n }}", vars) ==
        "line 1: unsupported operand types for +: string and integer");
  CHECK(render_error("{{ s + z + s }}", vars) ==
        "line 1: unsupported operand types for +: string and none");
  CHECK(render_error("{{ n + s + s }}", vars) ==
        "line 1: unsupported operand types for +: integer and string");
  CHECK(render_error("{% set x = s + s + f %}", vars) ==
        "line 1: unsupported operand types for +: string and float");
  // The output limit counts the whole chain before any of it is written.
  std::string error, out;
  auto t = Template::parse("ab{{ s + s + s }}", error);
  REQUIRE(t != nullptr);
  CHECK_FALSE(t->render(vars, out, error, {.max_output_bytes = 4}));
  CHECK(error == "line 1: output over 4 bytes");
  CHECK(out == "ab");
  CHECK(t->render(vars, out, error, {.max_output_bytes = 5}));
  CHECK(out == "abSSS");
}

TEST_CASE("loop holds every field at every item") {
  CHECK(render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
               "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
               "{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}") ==
        "1032TrueFalse32;2121FalseFalse313;3210FalseTrue32;");
  // A filtered loop counts what passes.
  CHECK(render("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}/{{ loop.length }}"
               "{% endfor %}") == "1/22/2");
}

TEST_CASE("a template's own work is bounded too: memory, macro calls, nesting") {
  // A replacement as long as the text at every position: 4,000 x 4,000 bytes.
  CHECK(
      render_error("{{ s | replace('a', s) | length }}", {{"s", Value(std::string(4000, 'a'))}}) ==
      "line 1: replace(): result over 8388608 bytes");
  // A list holding the one before it twice, 30 times: 2^30 elements once written.
  CHECK(render_error("{% set ns = namespace(x=[1]) %}{% for i in range(30) %}"
                     "{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x | tojson | length }}") ==
        "line 1: tojson: result over 8388608 bytes");
  // A string, a list and a "~" doubled 40 times: 2^40 bytes or items.
  CHECK(render_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                     "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}") ==
        "line 1: a string over 8388608 bytes");
  CHECK(render_error("{% set ns = namespace(x=[1]) %}{% for i in range(40) %}"
                     "{% set ns.x = ns.x + ns.x %}{% endfor %}{{ ns.x | length }}") ==
        "line 1: a list over 8388608 items");
  CHECK(render_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}") ==
        "line 1: a string over 8388608 bytes");
  CHECK(render_error("{{ s + s + s }}", {{"s", Value(std::string(3u << 20, 'a'))}}) ==
        "line 1: a string over 8388608 bytes");
  // Two calls per level, 2^30 calls in all, within the depth limit.
  CHECK(render_error("{% macro f(k) %}{% if k > 0 %}{{ f(k - 1) }}{{ f(k - 1) }}{% endif %}"
                     "{% endmacro %}{{ f(30) | length }}") == "line 1: too many macro calls");
  CHECK(parse_error("{{ " + std::string(400, '(') + "1" + std::string(400, ')') + " }}") ==
        "line 1: nested too deeply");
  std::string ifs;
  for (int i = 0; i < 1100; ++i) ifs += "{% if x %}";
  for (int i = 0; i < 1100; ++i) ifs += "{% endif %}";
  CHECK(parse_error(ifs) == "line 1: nested too deeply");
  // 300 levels are fine.
  CHECK(render("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}") == "1");
}

TEST_CASE("Python semantics where Jinja2 and JavaScript differ") {
  // str.strip() removes U+0085 and U+001C; JavaScript's trim() would not.
  CHECK(render("[{{ x | trim }}]", {{"x", Value("\xC2\x85\x1c a \xE3\x80\x80")}}) == "[a]");
  // Lengths and indices count code points.
  CHECK(render("{{ x | length }} {{ x[1] }} {{ x[-1] }}", {{"x", Value("h\xC3\xA9llo")}}) ==
        "5 \xC3\xA9 o");
  // Variables shadow the globals of the same name.
  CHECK(render("{{ range }}", {{"range", Value(3)}}) == "3");
}
