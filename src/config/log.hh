#pragma once
// The server's logger: one line per event on stderr, JSON (one object per
// line, for log pipelines) or text (for a terminal), filtered by level.
// Configured once from --log-format/--log-level (docs/admin.md). Each call
// formats and issues one write(2), so lines from different cores never
// interleave; it is meant for rare events (startup, shutdown, errors), never
// the per-request hot path.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace ic::config {

enum class LogFormat { json, text };
enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

// Sets format and minimum level for every later log() call. Call before the
// reactor threads start (the settings are plain globals read without locks).
void configure_logging(LogFormat format, LogLevel min_level);

// True when `level` passes the configured minimum.
bool log_enabled(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

// Writes one line: JSON {"ts":"<RFC3339 UTC, ms>","level":"info","msg":...,
// "<key>":"<value>",...} or text "<ts> INFO msg key=value ...".
void log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

// The line log() would write (without the trailing newline) at wall time
// `wall_us` (µs since the Unix epoch); exposed for tests.
std::string format_log_line(LogFormat format, LogLevel level, std::int64_t wall_us,
                            std::string_view msg, std::initializer_list<LogField> fields);

}  // namespace ic::config
