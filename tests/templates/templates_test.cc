// src/templates: the template document (errors, revisions), typed variables,
// the stable cut, the chat_template probe, and renders with the real Qwen3
// tokenizer: exact bytes, offsets, token counts and stable_prefix_hash (from
// libxxhash, tests/templates/fixture.hh), and every RENDER_ERROR path.
// Exit 77 (SKIP) without the npm Qwen3 tokenizer files.

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "chat_template/template.hh"
#include "fixture.hh"
#include "prompt_text/encoder.hh"
#include "templates/render.hh"
#include "templates/stable_prefix.hh"
#include "templates/template_set.hh"
#include "test_main.hh"

namespace ic::test {
std::string skip_reason() {
  return templates::test::have_qwen3()
             ? ""
             : "no npm Qwen3 tokenizer files (npm ci in tests/tokenizer/oracle)";
}
}  // namespace ic::test

namespace {

using namespace ic::templates;
using ic::templates::test::Decl;
using ic::templates::test::document;

const std::string kAgent =
    "<|im_start|>system\nYou are a coding agent.\n{{ tools }}\nToday is {{ today }}."
    "<|im_end|>\n<|im_start|>user\n{{ question }}<|im_end|>\n<|im_start|>assistant\n";
const std::vector<Decl> kAgentVars = {{"tools", "string", "stable"},
                                      {"today", "string", "volatile"},
                                      {"question", "string", "volatile"}};
const std::string kTools = "Tools: read_file(path), write_file(path, text), run(cmd).";

std::shared_ptr<const TemplateSet> parse_ok(const std::string& doc) {
  TemplateParseResult r = parse_templates_json(doc, 16);
  REQUIRE_MESSAGE(r.ok(), r.error);
  return r.set;
}

std::string parse_error(const std::string& doc) {
  TemplateParseResult r = parse_templates_json(doc, 16);
  REQUIRE(!r.ok());
  return r.error;
}

std::vector<std::uint32_t> encode(std::string_view text) {
  std::vector<std::uint32_t> ids;
  REQUIRE(ic::templates::test::models().find("qwen3")->tokenizer->encode(
              text, ic::prompt_text::thread_workspace(), ids) == ic::tokenizer::EncodeStatus::kOk);
  return ids;
}

struct Call {
  bool ok = false;
  Rendered out;
  std::string error;
};

Call render(const PromptTemplate& t, std::vector<VariableView> vars, RenderLimits limits = {}) {
  Call c;
  c.ok = render_template(t, vars, &ic::templates::test::models(), limits, c.out, c.error);
  return c;
}

}  // namespace

TEST_CASE("the document: fields, defaults and the 400 reasons") {
  const auto set = parse_ok(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m",
      "source":"hi {{ x }}","variables":[{"name":"x","stability":"volatile"}]}]})");
  REQUIRE(set->size() == 1);
  const PromptTemplate* t = set->find("t", "n");
  REQUIRE(t != nullptr);
  CHECK(t->block_size == 16);  // the default given to the parser
  CHECK(t->variables.at(0).type == VariableType::kString);
  CHECK(t->volatile_names == std::vector<std::string>{"x", "strftime_now"});
  CHECK(set->find("t", "m") == nullptr);
  CHECK(set->find("u", "n") == nullptr);
  CHECK(parse_ok(R"({"version":1})")->size() == 0);

  CHECK(parse_error("{") == "not a JSON document (or trailing data)");
  CHECK(parse_error(R"({"version":1} x)") == "not a JSON document (or trailing data)");
  CHECK(parse_error(R"({"version":2,"templates":[]})") == "unsupported version 2 (want 1)");
  CHECK(parse_error(R"({"version":1,"extra":1})") == "unknown field \"extra\" in document");
  CHECK(parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m"}]})") ==
        "templates[0]: missing \"source\"");
  CHECK(parse_error(
            R"({"version":1,"templates":[{"tenantID":"","name":"n","model":"m","source":""}]})") ==
        "templates[0].tenantID: empty");
  CHECK(
      parse_error(
          R"({"version":1,"templates":[{"tenantID":"t","name":"n@1","model":"m","source":""}]})") ==
      "templates[0].name: '@' separates a name from a revision");
  CHECK(
      parse_error(
          R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m","source":"","blockSize":0}]})") ==
      "templates[0].blockSize: expected an integer in 1..65536");
  CHECK(parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m","source":"",
      "variables":[{"name":"1x","stability":"stable"}]}]})") ==
        "templates[0].variables[0].name: not an identifier");
  CHECK(parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m","source":"",
      "variables":[{"name":"x","stability":"stable"},{"name":"x","stability":"volatile"}]}]})") ==
        "templates[0].variables[1]: \"x\" declared twice");
  CHECK(parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m","source":"",
      "variables":[{"name":"x","type":"date","stability":"stable"}]}]})") ==
        "templates[0].variables[0].type: unknown type \"date\" (string, integer, number, boolean, "
        "json)");
  CHECK(parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m","source":"",
      "variables":[{"name":"x","stability":"sometimes"}]}]})") ==
        "templates[0].variables[0].stability: unknown stability \"sometimes\" (stable, volatile)");
  CHECK(
      parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m","source":""},
      {"tenantID":"t","name":"n","model":"m","source":"x"}]})") == "templates[1]: t/n given twice");
  CHECK(parse_error(R"({"version":1,"templates":[{"tenantID":"t","name":"n","model":"m",
      "source":"{% frobnicate %}"}]})")
            .rfind("templates[0] (t/n): line 1: ", 0) == 0);
  CHECK(parse_error(std::string(kMaxDocumentBytes + 1, ' ')) == "document over 1048576 bytes");
}

TEST_CASE("revisions identify the content, not the tenant or the name") {
  const auto a = parse_ok(document("agent", kAgent, kAgentVars));
  const std::string rev = a->find("team-a", "agent")->revision;
  CHECK(rev.size() == 16);
  CHECK(rev.find_first_not_of("0123456789abcdef") == std::string::npos);
  // The same content again: the same revision, under another name too.
  CHECK(parse_ok(document("agent", kAgent, kAgentVars))->find("team-a", "agent")->revision == rev);
  CHECK(parse_ok(document("other", kAgent, kAgentVars))->find("team-a", "other")->revision == rev);
  // Any change of source, variables or block size is a new revision.
  CHECK(parse_ok(document("agent", kAgent + " ", kAgentVars))->find("team-a", "agent")->revision !=
        rev);
  auto vars = kAgentVars;
  vars[0].stability = "volatile";
  CHECK(parse_ok(document("agent", kAgent, vars))->find("team-a", "agent")->revision != rev);
  CHECK(parse_ok(document("agent", kAgent, kAgentVars, 8))->find("team-a", "agent")->revision !=
        rev);
}

TEST_CASE("the stable cut: after the last newline before a printable character") {
  CHECK(stable_cut("abc", 3) == 3);  // nothing volatile: the whole prompt
  CHECK(stable_cut("abc\ndef\nghi", 10) == 8);
  CHECK(stable_cut("abc\ndef\nghi", 8) == 4);  // the byte at the cut must be stable
  CHECK(stable_cut("abc\ndef\nghi", 9) == 8);
  CHECK(stable_cut("abc\n def\n\nghi", 12) == 10);
  CHECK(stable_cut("abc\n def\n\n ghi", 13) == 0);  // only a space or a newline follows each
  CHECK(stable_cut("abc def", 5) == 0);
  CHECK(stable_cut("", 0) == 0);
}

TEST_CASE("the chat_template probe: where the first watched read happened") {
  std::string error;
  auto t = ic::chat_template::Template::parse(
      "{% macro m(x) %}[{{ x }}{{ v }}]{% endmacro %}ab{{ s }}cd{{ m(s) }}ef{{ v }}gh", error);
  REQUIRE(t != nullptr);
  ic::chat_template::RenderProbe probe;
  probe.watched = {"v"};
  std::string out;
  REQUIRE(t->render({{"s", "S"}, {"v", "VV"}}, out, error, {.probe = &probe}));
  CHECK(out == "abScd[SVV]efVVgh");
  CHECK(probe.first_read == 5);                // in the macro, called when "abScd" was written
  CHECK(probe.watched_output_bytes == 5 + 2);  // "[SVV]" and "VV"
  // A loop variable that shadows a watched name is not a read of it.
  auto loop = ic::chat_template::Template::parse("x{% for v in [1] %}{{ v }}{% endfor %}", error);
  ic::chat_template::RenderProbe none;
  none.watched = {"v"};
  REQUIRE(loop->render({{"v", "V"}}, out, error, {.probe = &none}));
  CHECK(out == "x1");
  CHECK(none.first_read == std::string::npos);
  // The output limit.
  CHECK_FALSE(loop->render({}, out, error, {.max_output_bytes = 1}));
  CHECK(error == "line 1: output over 1 bytes");
}

TEST_CASE("a render: exact bytes, offsets, stable tokens and stable_prefix_hash") {
  const auto set = parse_ok(document("agent", kAgent, kAgentVars));
  const PromptTemplate& t = *set->find("team-a", "agent");
  const Call a =
      render(t, {{"tools", kTools}, {"today", "2026-12-02"}, {"question", "Fix the bug."}});
  REQUIRE_MESSAGE(a.ok, a.error);
  const std::string stable = "<|im_start|>system\nYou are a coding agent.\n" + kTools + "\n";
  CHECK(a.out.prompt ==
        stable +
            "Today is 2026-12-02.<|im_end|>\n<|im_start|>user\nFix the bug.<|im_end|>\n"
            "<|im_start|>assistant");
  CHECK(a.out.volatile_byte_offset == stable.size() + std::string("Today is ").size());
  CHECK(a.out.stable_cut_bytes == stable.size());
  const std::vector<std::uint32_t> ids = encode(stable);
  CHECK(a.out.volatile_token_offset == static_cast<std::int32_t>(ids.size()));
  CHECK(a.out.stable_token_count == static_cast<std::int32_t>(ids.size() / 4 * 4));
  CHECK(a.out.stable_prefix_hash == ic::templates::test::vllm_prefix_hash(ids, 4, ids.size() / 4));
  // The stable tokens lead the whole prompt's tokens.
  const std::vector<std::uint32_t> all = encode(a.out.prompt);
  CHECK(std::vector<std::uint32_t>(all.begin(), all.begin() + static_cast<long>(ids.size())) ==
        ids);
  // Stable after the volatile part: ".<|im_end|>\n<|im_start|>user\n" and the rest, minus the
  // volatile outputs; under the 1,024-byte threshold.
  CHECK(a.out.stable_bytes_after_volatile ==
        a.out.prompt.size() - a.out.volatile_byte_offset - 10 - 12);
  CHECK_FALSE(a.out.cache_bust);

  // Other volatile values: the same stable prefix; other stable values: another one.
  const Call b =
      render(t, {{"question", "Add a test."}, {"today", "2027-01-01"}, {"tools", kTools}});
  REQUIRE(b.ok);
  CHECK(b.out.stable_prefix_hash == a.out.stable_prefix_hash);
  CHECK(b.out.stable_token_count == a.out.stable_token_count);
  const Call c = render(t, {{"tools", kTools + "!"}, {"today", "2026-12-02"}, {"question", "x"}});
  REQUIRE(c.ok);
  CHECK(c.out.stable_prefix_hash != a.out.stable_prefix_hash);
}

TEST_CASE("typed variables") {
  const auto set = parse_ok(document(
      "typed", "{{ n + 1 }} {{ x * 2 }} {{ 'yes' if b else 'no' }} {{ j.k[1] }} {{ j | tojson }}",
      {{"n", "integer", "stable"},
       {"x", "number", "stable"},
       {"b", "boolean", "stable"},
       {"j", "json", "stable"}}));
  const PromptTemplate& t = *set->find("team-a", "typed");
  const Call ok =
      render(t, {{"n", "41"}, {"x", "0.25"}, {"b", "true"}, {"j", R"({"k":[1,"two"],"a":null})"}});
  REQUIRE_MESSAGE(ok.ok, ok.error);
  CHECK(ok.out.prompt == R"(42 0.5 yes two {"k": [1, "two"], "a": null})");
  CHECK(ok.out.volatile_byte_offset == ok.out.prompt.size());  // nothing volatile
  CHECK(ok.out.stable_cut_bytes == ok.out.prompt.size());

  const auto error_of = [&](std::vector<VariableView> vars) {
    const Call c = render(t, vars);
    CHECK_FALSE(c.ok);
    CHECK(c.out.prompt.empty());  // nothing partial
    return c.error;
  };
  CHECK(error_of({{"n", "4.5"}, {"x", "1"}, {"b", "true"}, {"j", "1"}}) ==
        "variable \"n\": not an integer");
  CHECK(error_of({{"n", "4"}, {"x", "inf"}, {"b", "true"}, {"j", "1"}}) ==
        "variable \"x\": not a number");
  CHECK(error_of({{"n", "4"}, {"x", "1"}, {"b", "True"}, {"j", "1"}}) ==
        "variable \"b\": not a boolean (true or false)");
  CHECK(error_of({{"n", "4"}, {"x", "1"}, {"b", "true"}, {"j", "{"}}) ==
        "variable \"j\": not a JSON value");
  CHECK(error_of({{"n", "4"}, {"x", "1"}, {"b", "true"}}) == "missing variable \"j\"");
  CHECK(error_of({{"n", "4"}, {"x", "1"}, {"b", "true"}, {"j", "1"}, {"z", ""}}) ==
        "undeclared variable \"z\"");
}

TEST_CASE("render errors: raise_exception, a type error, the size limit, no tokenizer") {
  const auto set = parse_ok(document(
      "strict",
      "{% if n > 3 %}{{ raise_exception('n is too large') }}{% endif %}{{ 'x' * n }}{{ s + 1 }}",
      {{"n", "integer", "stable"}, {"s", "string", "stable"}}));
  const PromptTemplate& t = *set->find("team-a", "strict");
  Call c = render(t, {{"n", "4"}, {"s", "a"}});
  CHECK_FALSE(c.ok);
  CHECK(c.error == "line 1: n is too large");
  c = render(t, {{"n", "1"}, {"s", "a"}});
  CHECK_FALSE(c.ok);
  CHECK(c.error == "line 1: unsupported operand types for +: string and integer");
  RenderLimits small;
  small.max_rendered_bytes = 2;
  const auto big = parse_ok(document("big", "{{ 'x' * n }}", {{"n", "integer", "stable"}}));
  c = render(*big->find("team-a", "big"), {{"n", "3"}}, small);
  CHECK_FALSE(c.ok);
  CHECK(c.error == "line 1: output over 2 bytes");
  CHECK(c.out.prompt.empty());
  CHECK(render(*big->find("team-a", "big"), {{"n", "2"}}, small).ok);

  // A caller's value where int64 arithmetic overflows, or of a kind a builtin cannot take.
  const auto ints =
      parse_ok(document("ints",
                        "{{ n + 1 }}{{ n * 2 }}{{ -n }}{{ n // -1 }}{{ 2 ** n }}{% for i in "
                        "range(0, 9223372036854775807, n) %}{{ i }}{% endfor %}",
                        {{"n", "integer", "stable"}}));
  c = render(*ints->find("team-a", "ints"), {{"n", "9223372036854775807"}});
  CHECK_FALSE(c.ok);
  CHECK(c.error == "line 1: integer overflow");
  c = render(*ints->find("team-a", "ints"), {{"n", "-9223372036854775808"}});
  CHECK_FALSE(c.ok);
  CHECK(c.error == "line 1: integer overflow");
  c = render(*ints->find("team-a", "ints"), {{"n", "4611686018427387904"}});  // 2^62
  CHECK_FALSE(c.ok);
  CHECK(c.error == "line 1: integer overflow");  // n * 2
  const auto range = parse_ok(document(
      "range", "{% for i in range(0, 9223372036854775807, n) %}{{ i }},{% endfor %}{{ range(j) }}",
      {{"n", "integer", "stable"}, {"j", "json", "stable"}}));
  c = render(*range->find("team-a", "range"), {{"n", "4611686018427387904"}, {"j", "\"x\""}});
  CHECK_FALSE(c.ok);
  CHECK(c.error.rfind("render error: ", 0) == 0);  // range() of a string
  CHECK(c.out.prompt.empty());
  c = render(*range->find("team-a", "range"), {{"n", "4611686018427387904"}, {"j", "2"}});
  REQUIRE_MESSAGE(c.ok, c.error);
  CHECK(c.out.prompt == "0,4611686018427387904,[0, 1]");  // the step past int64 ends the range

  const auto other = parse_ok(R"({"version":1,"templates":[{"tenantID":"t","name":"n",
      "model":"no-such-model","source":"x"}]})");
  Rendered out;
  std::string error;
  CHECK_FALSE(
      render_template(*other->find("t", "n"), {}, &ic::templates::test::models(), {}, out, error));
  CHECK(error == "no tokenizer loaded for model \"no-such-model\"");
}

TEST_CASE("cache-bust diagnosis: a volatile value before a large stable section") {
  const std::string rules(2000, 'r');
  const auto set =
      parse_ok(document("bust", "Date: {{ today }}\n" + rules + "\n{{ question }}",
                        {{"today", "string", "volatile"}, {"question", "string", "volatile"}}));
  const Call c =
      render(*set->find("team-a", "bust"), {{"today", "2026-12-02"}, {"question", "Why?"}});
  REQUIRE(c.ok);
  CHECK(c.out.volatile_byte_offset == 6);
  CHECK(c.out.stable_cut_bytes == 0);
  CHECK(c.out.volatile_token_offset == 0);
  CHECK(c.out.stable_token_count == 0);
  CHECK(c.out.stable_prefix_hash.empty());
  CHECK(c.out.stable_bytes_after_volatile == 1 + 2000 + 1);
  CHECK(c.out.cache_bust);
  // Reordered (docs/templates.md): the same text first, the volatile values last.
  const auto fixed =
      parse_ok(document("fixed", rules + "\nDate: {{ today }}\n{{ question }}",
                        {{"today", "string", "volatile"}, {"question", "string", "volatile"}}));
  const Call f =
      render(*fixed->find("team-a", "fixed"), {{"today", "2026-12-02"}, {"question", "Why?"}});
  REQUIRE(f.ok);
  CHECK(f.out.stable_cut_bytes == 2001);
  CHECK(f.out.stable_bytes_after_volatile == 1);
  CHECK_FALSE(f.out.cache_bust);
  CHECK(f.out.stable_token_count > 0);
}

namespace {

// The ```json blocks of docs/templates.md, in order.
std::vector<std::string> doc_examples() {
  const std::string text =
      ic::templates::test::read_file(std::string(IC_DOCS_DIR) + "/templates.md");
  std::vector<std::string> out;
  for (std::size_t at = text.find("```json\n"); at != std::string::npos;
       at = text.find("```json\n", at)) {
    const std::size_t begin = at + 8;
    const std::size_t end = text.find("```", begin);
    REQUIRE(end != std::string::npos);
    out.push_back(text.substr(begin, end - begin));
    at = end + 3;
  }
  return out;
}

}  // namespace

TEST_CASE("docs/templates.md: its documents load, and the reordering does what it says") {
  const std::vector<std::string> examples = doc_examples();
  REQUIRE(examples.size() == 3);
  const auto first = parse_ok(examples[0]);
  CHECK(first->find("team-a", "agent") != nullptr);
  const std::string rules(2000, 'r');
  const std::vector<VariableView> vars = {
      {"today", "2026-12-02"}, {"rules", rules}, {"question", "Why?"}};
  const auto before = parse_ok(examples[1]);
  const Call b = render(*before->find("team-a", "support"), vars);
  REQUIRE_MESSAGE(b.ok, b.error);
  CHECK(b.out.volatile_byte_offset == 9);
  CHECK(b.out.stable_token_count == 0);
  CHECK(b.out.cache_bust);
  const auto after = parse_ok(examples[2]);
  const Call a = render(*after->find("team-a", "support"), vars);
  REQUIRE_MESSAGE(a.ok, a.error);
  CHECK_FALSE(a.out.cache_bust);
  CHECK(a.out.stable_token_count > 2000 / 8);  // the rules' tokens, in whole blocks of 16
  const Call other = render(*after->find("team-a", "support"),
                            {{"today", "2027-01-01"}, {"rules", rules}, {"question", "How?"}});
  REQUIRE(other.ok);
  CHECK(other.out.stable_prefix_hash == a.out.stable_prefix_hash);
}

TEST_CASE(
    "a render in steps (the server's slices): the answers of one go, however the steps fall") {
  const auto set = parse_ok(document("agent", kAgent, kAgentVars));
  const PromptTemplate& t = *set->find("team-a", "agent");
  // Stable tools text no other case renders (the per-thread cache would answer it at once).
  std::string tools;
  for (int i = 0; i < 400; ++i) tools += "tool_" + std::to_string(i) + "(path, text) ";
  const std::vector<VariableView> vars = {
      {"tools", tools}, {"today", "2026-12-02"}, {"question", "Fix the bug."}};
  TemplateRender job;
  std::string error;
  REQUIRE_MESSAGE(job.start(t, vars, &ic::templates::test::models(), {}, error), error);
  // Stopped at every other poll: one unit of the tokenizer per step at most.
  int polls = 0, steps = 0;
  const auto every_other = [&polls] { return ++polls % 2 == 0; };
  std::optional<bool> done;
  while (!(done = job.step(every_other, error)) && steps < 100'000) ++steps;
  REQUIRE(done.has_value());
  REQUIRE_MESSAGE(*done, error);
  CHECK(steps >= 4);  // ~5 KB: a poll every few KiB of the tokenizer's work
  const Rendered sliced = job.result();
  const std::string stable = "<|im_start|>system\nYou are a coding agent.\n" + tools + "\n";
  CHECK(sliced.stable_cut_bytes == stable.size());
  const std::vector<std::uint32_t> ids = encode(stable);
  CHECK(sliced.volatile_token_offset == static_cast<std::int32_t>(ids.size()));
  CHECK(sliced.stable_token_count == static_cast<std::int32_t>(ids.size() / 4 * 4));
  CHECK(sliced.stable_prefix_hash == ic::templates::test::vllm_prefix_hash(ids, 4, ids.size() / 4));
  // In one go now: the cache answers, with the same result.
  const Call whole = render(t, vars);
  REQUIRE(whole.ok);
  CHECK(whole.out.prompt == sliced.prompt);
  CHECK(whole.out.stable_prefix_hash == sliced.stable_prefix_hash);
  CHECK(whole.out.volatile_token_offset == sliced.volatile_token_offset);
  CHECK(whole.out.stable_bytes_after_volatile == sliced.stable_bytes_after_volatile);
  // A stable text seen before: the first step answers whatever `stop` says.
  TemplateRender again;
  REQUIRE(again.start(t, vars, &ic::templates::test::models(), {}, error));
  CHECK(again.step([] { return true; }, error) == std::optional<bool>(true));
  CHECK(again.result().stable_prefix_hash == sliced.stable_prefix_hash);
  // A new stable text with `stop` true: paused before any work.
  TemplateRender fresh;
  const std::string other_tools = tools + "!";
  const std::vector<VariableView> other = {
      {"tools", other_tools}, {"today", "x"}, {"question", "y"}};
  REQUIRE(fresh.start(t, other, &ic::templates::test::models(), {}, error));
  const std::optional<bool> first = fresh.step([] { return true; }, error);
  CHECK_MESSAGE(!first.has_value(), error);
}

TEST_CASE("a render in steps: a 1 MiB stable word is refused as in one go, after bounded work") {
  const auto set = parse_ok(document("agent", kAgent, kAgentVars));
  const PromptTemplate& t = *set->find("team-a", "agent");
  const std::string word(1 << 20, 'a');
  const std::vector<VariableView> vars = {{"tools", word}, {"today", "x"}, {"question", "y"}};
  RenderLimits limits;
  limits.max_rendered_bytes = 2 << 20;
  TemplateRender job;
  std::string error;
  REQUIRE(job.start(t, vars, &ic::templates::test::models(), limits, error));
  int polls = 0;
  std::optional<bool> done;
  while (!(done = job.step([&polls] { return ++polls % 2 == 0; }, error))) {
  }
  CHECK_FALSE(*done);
  CHECK(error == "the tokenizer refused the stable prefix (a pre-token over its bound)");
  CHECK(job.result().prompt.empty());
  const Call whole = render(t, vars, limits);
  CHECK_FALSE(whole.ok);
  CHECK(whole.error == error);
}
