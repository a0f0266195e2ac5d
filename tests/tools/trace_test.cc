// Mooncake trace parsing: field checks, block token counts, the wire form of ids, bad lines with
// their numbers, and the shared trace's published facts (data README).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

#include "common/trace.hh"
#include "support/temp_dir.hh"

using namespace ic::tools;

namespace {
std::string shared_trace() {
  const char* dir = std::getenv("IC_SHARED_DATA");
  REQUIRE(dir != nullptr);
  return std::string(dir) + "/traces/mooncake_fast25_conversation_trace.jsonl";
}

}  // namespace

TEST_CASE("a valid line parses into every field") {
  std::string error;
  auto r = parse_trace_line(
      R"({"timestamp": 27482, "input_length": 1100, "output_length": 7, "hash_ids": [0, 9, 12]})",
      &error);
  REQUIRE(r.has_value());
  CHECK(r->timestamp_ms == 27482);
  CHECK(r->input_length == 1100);
  CHECK(r->output_length == 7);
  CHECK(r->hash_ids == std::vector<std::uint64_t>{0, 9, 12});
  CHECK(block_token_counts(*r) == std::vector<std::int32_t>{512, 512, 76});
}

TEST_CASE("an exact multiple of 512 has a full last block") {
  std::string error;
  auto r = parse_trace_line(
      R"({"timestamp": 0, "input_length": 1024, "output_length": 0, "hash_ids": [4, 5]})", &error);
  REQUIRE(r.has_value());
  CHECK(block_token_counts(*r) == std::vector<std::int32_t>{512, 512});
}

TEST_CASE("malformed lines are rejected with a reason") {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"timestamp\": 0,", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"input_length": 5, "output_length": 1, "hash_ids": [0]})",
       "missing field \"timestamp\""},
      {R"({"timestamp": -1, "input_length": 5, "output_length": 1, "hash_ids": [0]})",
       "field \"timestamp\" must be an integer in [0, 9223372036854775]"},
      {R"({"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": []})",
       "field \"input_length\" must be > 0"},
      {R"({"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": "x"})",
       "field \"hash_ids\" must be an array"},
      {R"({"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [-3]})",
       "field \"hash_ids\" must hold non-negative integers"},
      {R"({"timestamp": 1, "input_length": 513, "output_length": 1, "hash_ids": [1]})",
       "hash_ids has 1 blocks, input_length 513 needs 2"},
  };
  for (const auto& [line, reason] : cases) {
    CAPTURE(line);
    std::string error;
    CHECK_FALSE(parse_trace_line(line, &error));
    CHECK(error == reason);
  }
}

TEST_CASE("a hash id travels as 8 big-endian bytes") {
  CHECK(block_hash_bytes(0) == std::string(8, '\0'));
  CHECK(block_hash_bytes(0x0102030405060708ull) == std::string("\x01\x02\x03\x04\x05\x06\x07\x08"));
  CHECK(block_hash_bytes(182789) == std::string("\0\0\0\0\0\x02\xca\x05", 8));
}

TEST_CASE("--on-bad-line values") {
  CHECK(parse_bad_line_policy("skip") == BadLinePolicy::kSkip);
  CHECK(parse_bad_line_policy("fail") == BadLinePolicy::kFail);
  CHECK_FALSE(parse_bad_line_policy("ignore").has_value());
}

TEST_CASE("bad lines are reported with their line numbers; skip goes on, fail stops") {
  const std::string good =
      R"({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [1]})";
  const auto path = ic::test::write_temp_file(
      "ic-trace-test", good + "\n\nnot json\n" + good + "\n{\"timestamp\": 1}\n" + good + "\n");
  std::vector<std::string> reported;
  auto skip = load_trace(path, BadLinePolicy::kSkip, 0,
                         [&](const std::string& m) { reported.push_back(m); });
  CHECK(skip.error.empty());
  CHECK(skip.requests.size() == 3);
  CHECK(skip.bad_lines == 2);
  CHECK(reported == std::vector<std::string>{"line 3: not valid JSON",
                                             "line 5: missing field \"input_length\""});
  reported.clear();
  auto fail = load_trace(path, BadLinePolicy::kFail, 0,
                         [&](const std::string& m) { reported.push_back(m); });
  CHECK(fail.requests.size() == 1);
  CHECK(fail.failed_line == 3);
  CHECK(fail.error == "line 3: not valid JSON");
  CHECK(reported.size() == 1);
  auto limited = load_trace(path, BadLinePolicy::kSkip, 2, [](const std::string&) {});
  CHECK(limited.requests.size() == 2);
  std::remove(path.c_str());
}

TEST_CASE("a missing file is an error, not an empty trace") {
  auto load =
      load_trace("/nonexistent/trace.jsonl", BadLinePolicy::kSkip, 0, [](const std::string&) {});
  CHECK(load.error == "cannot open trace file /nonexistent/trace.jsonl");
  CHECK(load.requests.empty());
}

TEST_CASE("the shared conversation trace matches its published facts") {
  auto load = load_trace(shared_trace(), BadLinePolicy::kFail, 0, [](const std::string&) {});
  REQUIRE(load.error.empty());
  CHECK(load.requests.size() == 12031);
  std::size_t refs = 0;
  std::set<std::uint64_t> distinct;
  bool all_start_with_zero = true;
  for (const auto& r : load.requests) {
    refs += r.hash_ids.size();
    distinct.insert(r.hash_ids.begin(), r.hash_ids.end());
    all_start_with_zero = all_start_with_zero && r.hash_ids.front() == 0;
  }
  CHECK(refs == 288500);
  CHECK(distinct.size() == 182790);
  CHECK(all_start_with_zero);
  CHECK(load.requests.front().input_length == 6758);
  CHECK(load.requests.front().hash_ids.size() == 14);
}
