#pragma once
// The server's logger: one line per event on stderr, JSON (one object per
// line, for log pipelines) or text (for a terminal), filtered by level.
// Configured once from --log-format/--log-level (docs/admin.md).
//
// Never blocks a reactor: once start_log_writer() ran, log() only formats the
// line and appends it to a bounded in-memory queue (a mutex held for the
// append, never across I/O); a writer thread does the write(2). A full queue
// (stderr piped into a stalled reader) drops lines and the writer reports
// how many with one "log lines dropped" warning once it catches up. Before
// the writer starts (startup, tests, tools) and after stop_log_writer(),
// log() writes directly. Each line is one write(2), so lines never interleave.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ic::base {

enum class LogFormat { json, text };
enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

// Sets format and minimum level for every later log() call. Call before the
// reactor threads start (the settings are plain globals read without locks).
void configure_logging(LogFormat format, LogLevel min_level);

// True when `level` passes the configured minimum. Check it before building
// expensive fields for debug lines.
bool log_enabled(LogLevel level);

// A field value: text, or a number/bool written as a JSON number/bool (so log
// pipelines can compare and sum them without parsing strings).
struct LogValue {
  LogValue(std::string v) : value(std::move(v)) {}
  LogValue(std::string_view v) : value(std::string(v)) {}
  LogValue(const char* v) : value(std::string(v)) {}
  LogValue(bool v) : value(v) {}
  LogValue(int v) : value(static_cast<std::int64_t>(v)) {}
  LogValue(long v) : value(static_cast<std::int64_t>(v)) {}
  LogValue(long long v) : value(static_cast<std::int64_t>(v)) {}
  LogValue(unsigned v) : value(static_cast<std::uint64_t>(v)) {}
  LogValue(unsigned long v) : value(static_cast<std::uint64_t>(v)) {}
  LogValue(unsigned long long v) : value(static_cast<std::uint64_t>(v)) {}
  LogValue(double v) : value(v) {}
  std::variant<std::string, bool, std::int64_t, std::uint64_t, double> value;
};

using LogField = std::pair<std::string_view, LogValue>;

// Writes one line: JSON {"ts":"<RFC3339 UTC, ms>","level":"info","msg":...,
// "<key>":<value>,...} or text "<ts> INFO msg key=value ...".
void log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

// Same as log(), but written now by the calling thread even while the writer
// thread runs (the queue is bypassed, not flushed): for the last line before
// the process aborts (base/check.hh).
void log_now(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

// The line log() would write (without the trailing newline) at wall time
// `wall_us` (µs since the Unix epoch); exposed for tests.
std::string format_log_line(LogFormat format, LogLevel level, std::int64_t wall_us,
                            std::string_view msg, std::initializer_list<LogField> fields);

// Starts the writer thread (log() stops writing inline); `max_queued_bytes`
// bounds the lines waiting for stderr. Idempotent.
void start_log_writer(std::size_t max_queued_bytes = std::size_t{1} << 20);
// Writes what is queued and joins the writer thread; log() writes inline again.
void stop_log_writer();
// Lines dropped because the queue was full, since the process started.
std::uint64_t log_lines_dropped();

// Lets one line through per `interval_us` for a noisy event (auth failures,
// TLS handshake failures, limit hits); the rest are counted and the count is
// reported with the next line that passes. Lock-free; usable from any core.
class LogRateLimit {
 public:
  explicit LogRateLimit(std::int64_t interval_us) : interval_us_(interval_us) {}
  // True when a line may be written now (monotonic µs `now_us`); then
  // `*suppressed` is the number of events swallowed since the last one.
  bool allow(std::int64_t now_us, std::uint64_t* suppressed);

 private:
  std::int64_t interval_us_;
  std::atomic<std::int64_t> next_us_{0};      // earliest time the next line may pass
  std::atomic<std::uint64_t> suppressed_{0};  // events swallowed since the last line
};

// Monotonic clock for LogRateLimit, µs.
std::int64_t log_clock_us();

}  // namespace ic::base
