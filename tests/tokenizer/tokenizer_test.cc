// Unit tests of src/tokenizer on a small tokenizer.json built here: byte-level
// alphabet, merge order, ignore_merges, added tokens, NFC, the split regex and
// the load errors. The real models are checked against the npm oracle in
// oracle_test.cc.

#include "tokenizer/tokenizer.hh"

#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "small_tokenizer.hh"
#include "tokenizer/byte_level.hh"
#include "tokenizer/encoding.hh"
#include "tokenizer/normalizer.hh"
#include "tokenizer/split_regex.hh"
#include "tokenizer/utf8.hh"

using namespace ic::tokenizer;
using json = nlohmann::json;

namespace {

using ic::test::small_tokenizer;

std::string bl(std::string_view raw) { return ic::test::byte_level(raw); }

std::vector<TokenId> encode(const Tokenizer& t, std::string_view text) {
  Workspace ws;
  std::vector<TokenId> out;
  REQUIRE(t.encode(text, ws, out) == EncodeStatus::kOk);
  return out;
}

std::unique_ptr<Tokenizer> load(const json& j) {
  std::string error;
  auto t = Tokenizer::load(j.dump(), error);
  REQUIRE_MESSAGE(t != nullptr, error);
  return t;
}

}  // namespace

TEST_CASE("byte-level alphabet: printable bytes map to themselves, the rest to 256+") {
  CHECK(ic::tokenizer::byte_to_code_point('A') == U'A');
  CHECK(ic::tokenizer::byte_to_code_point(' ') == U'\u0120');   // 'Ġ'
  CHECK(ic::tokenizer::byte_to_code_point('\n') == U'\u010A');  // 'Ċ'
  CHECK(ic::tokenizer::byte_to_code_point(0xAD) == U'\u0143');
  CHECK(ic::tokenizer::decode_byte_level("\xC4\xA0hi") == std::string(" hi"));
  CHECK_FALSE(ic::tokenizer::decode_byte_level("\xE4\xB8\xAD").has_value());  // U+4E2D
}

TEST_CASE("UTF-8 validation rejects overlongs, surrogates and truncation") {
  using ic::tokenizer::valid_utf8;
  CHECK(valid_utf8("plain ascii"));
  CHECK(valid_utf8("\xE4\xB8\xAD\xF0\x9F\x98\x80"));
  CHECK_FALSE(valid_utf8("\xC0\xAF"));
  CHECK_FALSE(valid_utf8("\xED\xA0\x80"));
  CHECK_FALSE(valid_utf8("\xE4\xB8"));
  CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));
  // Past the eight-byte ASCII steps: the bad byte at every offset of a word.
  for (std::size_t at = 0; at < 24; ++at) {
    std::string text(24, 'a');
    CHECK(valid_utf8(text));
    text[at] = '\xFF';
    CHECK_FALSE(valid_utf8(text));
    text[at] = '\xC3';  // a two-byte code point cut by the end, or by an 'a'
    CHECK_FALSE(valid_utf8(text));
    text.insert(at + 1, 1, '\xA9');  // é: valid again
    CHECK(valid_utf8(text));
  }
}

TEST_CASE("merges apply lowest rank first, leftmost on a tie") {
  // rank 0: "b"+"c", rank 1: "a"+"b", rank 2: "a"+"bc".
  auto t = load(small_tokenizer({{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  // "abc": bc (0) before ab (1) → a|bc → abc (2).
  CHECK(encode(*t, "abc") == std::vector<TokenId>{258});
  // "abab": ab at 0 and at 2 (same rank): both merge.
  CHECK(encode(*t, "abab") == std::vector<TokenId>{257, 257});
  // "bcb": bc then nothing.
  CHECK(encode(*t, "bcb") == std::vector<TokenId>{256, 'b'});
  // Words split by the regex never merge across pieces: "ab" + " ab".
  CHECK(encode(*t, "ab ab") == std::vector<TokenId>{257, ' ', 257});
}

TEST_CASE("long words take the heap merge and agree with the array merge") {
  auto t = load(small_tokenizer({{"a", "a"}, {"aa", "aa"}, {"b", "a"}}));
  // 200 × 'a' (> the small-word limit): pairs of pairs, 50 tokens of "aaaa".
  const std::vector<TokenId> big = encode(*t, std::string(200, 'a'));
  CHECK(big == std::vector<TokenId>(50, 257));
  // 7 × 'a' (small path): aa aa aa a → aaaa aa a.
  CHECK(encode(*t, "aaaaaaa") == std::vector<TokenId>{257, 256, 'a'});
  // The same word twice (second from the word cache) gives the same ids.
  Workspace ws;
  std::vector<TokenId> first, second;
  REQUIRE(t->encode("baaa baaa", ws, first) == EncodeStatus::kOk);
  REQUIRE(t->encode("baaa baaa", ws, second) == EncodeStatus::kOk);
  // "baaa": a+a (rank 0) at the leftmost position wins over b+a (rank 2).
  CHECK(first == std::vector<TokenId>{'b', 256, 'a', ' ', 'b', 256, 'a'});
  CHECK(second == first);
}

TEST_CASE("ignore_merges: a word in the vocabulary is one token") {
  json j = small_tokenizer({{"a", "b"}});
  j["model"]["vocab"][bl("abc")] = 300;
  CHECK(encode(*load(j), "abc") == std::vector<TokenId>{256, 'c'});
  j["model"]["ignore_merges"] = true;
  CHECK(encode(*load(j), "abc") == std::vector<TokenId>{300});
}

TEST_CASE("added tokens are cut out first, leftmost-longest") {
  json j = small_tokenizer({});
  j["added_tokens"] = json::array({{{"id", 1000}, {"content", "<|x|>"}, {"special", true}},
                                   {{"id", 1001}, {"content", "<|x|>y"}, {"special", false}},
                                   {{"id", 1002}, {"content", "<"}, {"special", false}}});
  auto t = load(j);
  CHECK(encode(*t, "a<|x|>b") == std::vector<TokenId>{'a', 1000, 'b'});
  CHECK(encode(*t, "<|x|>y<|x") == std::vector<TokenId>{1001, 1002, '|', 'x'});
  CHECK(t->added_token_id("<|x|>") == 1000);
  CHECK(t->added_token_id("<|y|>") == -1);
}

TEST_CASE("added tokens found alike with one first byte (memchr) and several (byte table)") {
  json j = small_tokenizer({});
  j["added_tokens"] = json::array({{{"id", 1000}, {"content", "<|x|>"}},
                                   {{"id", 1001}, {"content", "<|x|>y"}},
                                   {{"id", 1002}, {"content", "<"}}});
  auto one_first = load(j);
  j["added_tokens"].push_back({{"id", 1003}, {"content", "[e]"}});
  auto several = load(j);
  const std::string text = "a<|x|>b<|x|>y<|x[e]<";
  CHECK(encode(*one_first, text) ==
        std::vector<TokenId>{'a', 1000, 'b', 1001, 1002, '|', 'x', '[', 'e', ']', 1002});
  CHECK(encode(*several, text) ==
        std::vector<TokenId>{'a', 1000, 'b', 1001, 1002, '|', 'x', 1003, 1002});
  // split_added: the same cuts, runs between them ("#id" for a token).
  std::vector<std::string> cuts;
  const auto cut = [&cuts](std::string_view piece, const TokenId* id) {
    cuts.emplace_back(id != nullptr ? std::string_view("#") : piece);
    if (id != nullptr) cuts.back() += std::to_string(*id);
  };
  several->split_added(text, cut);
  CHECK(cuts ==
        std::vector<std::string>{"a", "#1000", "b", "#1001", "#1002", "|x", "#1003", "#1002"});
  cuts.clear();
  one_first->split_added("plain text, no token", cut);
  CHECK(cuts == std::vector<std::string>{"plain text, no token"});
}

TEST_CASE("an added token across the Encoding's 64 KiB scan units is cut once") {
  json j = small_tokenizer({});
  j["added_tokens"] = json::array({{{"id", 1000}, {"content", "<|x|>"}}});
  auto t = load(j);
  const std::string text = std::string(65'534, 'a') + "<|x|>b<|x|>";
  std::vector<TokenId> expected(65'534, 'a');
  expected.insert(expected.end(), {1000, 'b', 1000});
  CHECK(encode(*t, text) == expected);
  Workspace ws;
  std::vector<TokenId> out;
  Encoding e(*t, text, out);
  int polls = 0;
  const auto every_other = [&] { return polls++ % 2 == 1; };
  EncodeStatus s;
  while ((s = e.step(ws, every_other)) == EncodeStatus::kPaused) {
  }
  REQUIRE(s == EncodeStatus::kOk);
  CHECK(out == expected);
}

TEST_CASE("NFC normalizer composes before the split") {
  json j = small_tokenizer({});
  j["normalizer"] = {{"type", "NFC"}};
  // e + U+0301 → é (C3 A9): two byte tokens instead of three.
  CHECK(encode(*load(j), "e\xCC\x81") == std::vector<TokenId>{0xC3, 0xA9});
  j["normalizer"] = nullptr;
  CHECK(encode(*load(j), "e\xCC\x81") == std::vector<TokenId>{'e', 0xCC, 0x81});
}

TEST_CASE("\\s follows Oniguruma's White_Space: U+0085 yes, U+180E no") {
  std::string out, error;
  REQUIRE(ic::tokenizer::rewrite_white_space(R"(a\sb[^\s\p{L}]\S)", out, error));
  const std::string ws(ic::tokenizer::kWhiteSpaceClass);
  CHECK(out == "a[" + ws + "]b[^" + ws + R"(\p{L}][^)" + ws + "]");
  CHECK_FALSE(ic::tokenizer::rewrite_white_space(R"([\S])", out, error));
  CHECK(error == "\\S inside a character class is not supported");
  auto t = load(small_tokenizer({}));
  // "x" + U+0085 + "y": U+0085 is white space, so it is its own piece (its two
  // bytes are still two tokens; the point is no regex error).
  CHECK(encode(*t, "x\xC2\x85y") == std::vector<TokenId>{'x', 0xC2, 0x85, 'y'});
}

TEST_CASE("encode fails cleanly on invalid UTF-8 and on the deadline") {
  auto t = load(small_tokenizer({}));
  Workspace ws;
  std::vector<TokenId> out;
  CHECK(t->encode("ab\xFF", ws, out) == EncodeStatus::kInvalidUtf8);
  std::string many;
  for (int i = 0; i < 1000; ++i) many += " w";
  CHECK(t->encode(many, ws, out, [] { return true; }) == EncodeStatus::kDeadline);
  CHECK(t->encode(many, ws, out, [] { return false; }) == EncodeStatus::kOk);
  CHECK(out.size() == 2000);
}

TEST_CASE("load rejects what it does not support, with the reason") {
  std::string error;
  CHECK(Tokenizer::load("{", error) == nullptr);
  CHECK(error.rfind("tokenizer.json: ", 0) == 0);
  json j = small_tokenizer({});
  j["normalizer"] = {{"type", "NFKC"}};
  CHECK(Tokenizer::load(j.dump(), error) == nullptr);
  CHECK(error == "normalizer \"NFKC\" is not supported (only NFC)");
  j = small_tokenizer({});
  j["model"]["byte_fallback"] = true;
  CHECK(Tokenizer::load(j.dump(), error) == nullptr);
  CHECK(error == "model BPE with byte_fallback, dropout or subword affixes is not supported");
  j = small_tokenizer({});
  j["model"]["merges"] = json::array({"a zz"});
  CHECK(Tokenizer::load(j.dump(), error) == nullptr);
  CHECK(error == "merge 0 (\"a\" \"zz\") names a token missing from the vocabulary");
  j = small_tokenizer({});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  CHECK(Tokenizer::load(j.dump(), error) == nullptr);
  CHECK(error.rfind("regex does not compile at offset 9", 0) == 0);
  j = small_tokenizer({});
  j["added_tokens"] = json::array({{{"id", 5}, {"content", "<m>"}, {"lstrip", true}}});
  CHECK(Tokenizer::load(j.dump(), error) == nullptr);
  CHECK(error == "added token \"<m>\": empty, lstrip, rstrip or single_word unsupported");
}

TEST_CASE("an Encoding stopped at every poll gives the tokens of one encode") {
  json j = small_tokenizer({{"a", "a"}, {"aa", "aa"}, {"a", "b"}, {" ", " "}});
  j["normalizer"] = {{"type", "NFC"}};
  j["added_tokens"] = json::array({{{"id", 1000}, {"content", "<|x|>"}}});
  auto t = load(j);
  std::string text;
  for (int i = 0; i < 3'000; ++i) text += " ab";
  // Appended piece by piece: gcc 12's -Wrestrict misfires on " " + std::string(...) here.
  text.append(" ").append(9'000, 'a').append("<|x|>").append(5'000, ' ').append("x");
  for (int i = 0; i < 2'000; ++i) text += "e\xCC\x81 ";  // NFC cut at each 'e' or space
  text += std::string(40'000, '\n') + "z";
  const std::vector<TokenId> whole = encode(*t, text);
  Workspace ws;
  std::vector<TokenId> out;
  Encoding e(*t, text, out);
  int polls = 0;
  const auto every_other = [&] { return polls++ % 2 == 1; };  // run to the next poll, pause
  int steps = 1;
  EncodeStatus s;
  while ((s = e.step(ws, every_other)) == EncodeStatus::kPaused) ++steps;
  REQUIRE(s == EncodeStatus::kOk);
  CHECK(steps > 20);
  CHECK(out == whole);
  CHECK(std::count(out.begin(), out.end(), 1000u) == 1);
}

TEST_CASE("Encoding bounds: a pre-token over 64 KiB, an NFC stretch over 2 KiB") {
  json j = small_tokenizer({});
  auto plain = load(j);
  Workspace ws;
  std::vector<TokenId> out;
  for (char c : {'a', ' ', '\n', '!'}) {
    CHECK(plain->encode(std::string(Encoding::kMaxPretokenBytes + 1, c), ws, out) ==
          EncodeStatus::kTooLong);
    CHECK(plain->encode(std::string(60'000, c), ws, out) == EncodeStatus::kOk);
  }
  CHECK(plain->encode(std::string(1'000'000, 'a'), ws, out) == EncodeStatus::kTooLong);
  j["normalizer"] = {{"type", "NFC"}};
  auto nfc = load(j);
  std::string marks = "e";
  for (int i = 0; i < 1'100; ++i) marks += "\xCC\x81";  // 2,200 bytes of U+0301
  CHECK(nfc->encode(marks, ws, out) == EncodeStatus::kTooLong);
  marks.resize(1 + 2 * 900);
  CHECK(nfc->encode(marks, ws, out) == EncodeStatus::kOk);
}

TEST_CASE("NFC cut points: where NFC cannot join the two sides") {
  using ic::tokenizer::nfc_cut_before;
  CHECK(nfc_cut_before(U'a'));
  CHECK(nfc_cut_before(U'\u00C5'));        // below U+0300
  CHECK(nfc_cut_before(U'\u4E2D'));        // CJK ideograph
  CHECK(nfc_cut_before(U'\uAC00'));        // Hangul syllable (composes only as the first)
  CHECK_FALSE(nfc_cut_before(U'\u0301'));  // combining acute
  CHECK_FALSE(nfc_cut_before(U'\u3099'));  // kana voicing mark
  CHECK_FALSE(nfc_cut_before(U'\u304B'));  // か: first of が
  CHECK_FALSE(nfc_cut_before(U'\u1161'));  // Hangul vowel jamo
  CHECK_FALSE(nfc_cut_before(U'\u212B'));  // Angstrom sign: decomposes
}
