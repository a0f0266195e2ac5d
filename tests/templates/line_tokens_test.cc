// The line-piece token cache of stable texts (templates/line_tokens.hh): its
// ids equal the tokenizer's ids of the whole text, with the Qwen3 files;
// pieces are cut where stable_cut may cut, at least 128 bytes long; a new
// text that changes one line tokenizes that line's piece only.

#include "templates/line_tokens.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fixture.hh"
#include "prompt_text/encoder.hh"
#include "templates/stable_prefix.hh"

using ic::templates::LineTokens;
using ic::templates::piece_end;
using ic::tokenizer::TokenId;

namespace {

const ic::tokenizer::Tokenizer& qwen3() {
  return *ic::templates::test::models().find("qwen3")->tokenizer;
}

std::vector<TokenId> whole(std::string_view text) {
  std::vector<TokenId> ids;
  REQUIRE(qwen3().encode(text, ic::prompt_text::thread_workspace(), ids) ==
          ic::tokenizer::EncodeStatus::kOk);
  return ids;
}

// A system prompt with a session line and `tools` tool descriptions.
std::string agent_text(const std::string& session, int tools) {
  std::string out = "<|im_start|>system\nYou are a coding agent.\nSession: " + session + "\n";
  for (int i = 0; i < tools; ++i) {
    const std::string n = std::to_string(i);
    out += "## tool_" + n + "\nTool " + n +
           " reads the named file of the working directory and returns its lines that match "
           "the given pattern.\n  indented: {\"path\": \"string\"}\n\n\tParameters: {\"type\": "
           "\"object\", \"über\": \"naïve 日本語\"}.\n";
  }
  return out;
}

}  // namespace

TEST_CASE("piece_end: the first cut position at least 128 bytes on, else the end") {
  const std::string line(100, 'a');
  // 100 '\n', 201 '\n', 202 ' ' (no cut), 205 '\n' (no cut), 206 'B', 307 '\n', 308 'C'.
  const std::string text = line + "\n" + line + "\n" + " x\n\nB" + line + "\nC";
  REQUIRE(text.size() == 309);
  CHECK(piece_end(text, 0) == 206);    // 101 is a cut, but under 128 bytes on
  CHECK(piece_end(text, 206) == 309);  // 308 is a cut, but only 102 bytes on
  CHECK(piece_end(text, 150) == 308);  // 206 is only 56 bytes on; 308 is 158
  CHECK(piece_end("short\nText", 0) == 10);
}

TEST_CASE("line tokens: the ids of the whole text; a changed line is the only miss") {
  if (!ic::templates::test::have_qwen3()) return;
  LineTokens cache;
  std::vector<TokenId> ids;
  const std::string one = agent_text("s-1", 12);
  REQUIRE(cache.encode(qwen3(), one, ids, {}) == ic::tokenizer::EncodeStatus::kOk);
  CHECK(ids == whole(one));
  const std::uint64_t pieces = cache.misses();
  CHECK(cache.hits() == 0);
  CHECK(pieces == 12);  // one per tool, the first with the system lines

  REQUIRE(cache.encode(qwen3(), one, ids, {}) == ic::tokenizer::EncodeStatus::kOk);
  CHECK(ids == whole(one));
  CHECK(cache.hits() == pieces);
  CHECK(cache.misses() == pieces);

  // A longer session value: the first piece only is new; the rest line up.
  const std::string two = agent_text("s-123456789", 12);
  REQUIRE(cache.encode(qwen3(), two, ids, {}) == ic::tokenizer::EncodeStatus::kOk);
  CHECK(ids == whole(two));
  CHECK(cache.misses() == pieces + 1);
  CHECK(cache.hits() == 2 * pieces - 1);

  // Shorter texts, cut where stable_cut cuts: still exact.
  for (std::size_t at = 1; at < two.size(); at += 97) {
    const std::string_view part =
        std::string_view(two).substr(0, ic::templates::stable_cut(two, at));
    REQUIRE(cache.encode(qwen3(), part, ids, {}) == ic::tokenizer::EncodeStatus::kOk);
    CHECK(ids == whole(part));
  }
  CHECK(cache.cached_ids() <= LineTokens::kMaxCachedIds);
}

TEST_CASE("line tokens: invalid UTF-8 and the deadline are the tokenizer's statuses") {
  if (!ic::templates::test::have_qwen3()) return;
  LineTokens cache;
  std::vector<TokenId> ids;
  CHECK(cache.encode(qwen3(), std::string(200, 'a') + "\nB\xff", ids, {}) ==
        ic::tokenizer::EncodeStatus::kInvalidUtf8);
  CHECK(cache.encode(qwen3(), agent_text("s", 3), ids, [] { return true; }) ==
        ic::tokenizer::EncodeStatus::kDeadline);
}
