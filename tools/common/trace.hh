// Mooncake-format JSONL trace reading (FAST '25 trace release; see
// tests/data/README.md): one request per line with `timestamp` (ms from
// trace start), `input_length` / `output_length` (tokens) and `hash_ids` (one
// chained prefix id per 512-token block, the last block usually partial).
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ic::tools {

// Tokens per Mooncake block (the trace's fixed block size).
inline constexpr std::int32_t kMooncakeBlockTokens = 512;

// One trace request. hash_ids.size() == ceil(input_length / 512) (checked on parse).
struct TraceRequest {
  std::int64_t timestamp_ms = 0;   // arrival, ms from trace start, >= 0
  std::int32_t input_length = 0;   // prompt tokens, > 0
  std::int32_t output_length = 0;  // generated tokens, >= 0
  std::vector<std::uint64_t> hash_ids;
};

// Parses one JSONL line. On failure returns nullopt and sets *error to a one-line reason
// (bad JSON, missing/negative field, hash_ids length != ceil(input_length/512)).
std::optional<TraceRequest> parse_trace_line(std::string_view line, std::string* error);

// Tokens per block of `request`: 512 for each block but the last, which holds
// input_length − 512·(n−1). Size == hash_ids.size().
std::vector<std::int32_t> block_token_counts(const TraceRequest& request);

// The wire form of a Mooncake id: 8 bytes, big-endian (tests/data/README.md).
std::string block_hash_bytes(std::uint64_t hash_id);

// What to do with a malformed line: report it (with its 1-based line number) and go on, or stop.
enum class BadLinePolicy { kSkip, kFail };

// Parses "skip" / "fail" (the --on-bad-line flag); nullopt for anything else.
std::optional<BadLinePolicy> parse_bad_line_policy(std::string_view text);

// Streams a trace file line by line. Blank lines are ignored (not counted as bad).
class TraceReader {
 public:
  // Opens `path`; ok() is false (and error() says why) when it cannot be read.
  explicit TraceReader(const std::string& path);

  // False when the file could not be opened.
  bool ok() const { return ok_; }
  // Why the file could not be opened, or "line N: reason" after a kBadLine.
  const std::string& error() const { return error_; }

  // Outcome of next(): a request, a malformed line, or the end of the file.
  enum class Next { kRequest, kBadLine, kEnd };
  // Reads the next non-blank line into *request. kBadLine leaves *request untouched and sets
  // error() to "line N: reason"; the caller decides (BadLinePolicy) whether to go on.
  Next next(TraceRequest* request);

  // 1-based number of the line last read (0 before the first).
  std::int64_t line_number() const { return line_number_; }

 private:
  std::ifstream in_;
  bool ok_ = false;
  std::string error_;
  std::string line_;
  std::int64_t line_number_ = 0;
};

// Result of load_trace(). failed_line is the 1-based line that stopped a kFail load (0 if none).
struct TraceLoad {
  std::vector<TraceRequest> requests;
  std::int64_t bad_lines = 0;
  std::int64_t failed_line = 0;
  std::string error;  // set when the file cannot be opened or a kFail load stopped
};

// Reads up to `limit` requests (0 = all). Every bad line is passed to `on_bad_line`
// ("line N: reason"); with kFail the load stops at the first one and sets error.
TraceLoad load_trace(const std::string& path, BadLinePolicy policy, std::int64_t limit,
                     const std::function<void(const std::string&)>& on_bad_line);

}  // namespace ic::tools
