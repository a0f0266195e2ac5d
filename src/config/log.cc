#include "config/log.hh"

#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace ic::config {

namespace {

LogFormat g_format = LogFormat::json;
LogLevel g_level = LogLevel::info;

std::string_view level_name(LogLevel level, bool upper) {
  switch (level) {
    case LogLevel::debug:
      return upper ? "DEBUG" : "debug";
    case LogLevel::info:
      return upper ? "INFO" : "info";
    case LogLevel::warn:
      return upper ? "WARN" : "warn";
    case LogLevel::error:
      return upper ? "ERROR" : "error";
  }
  return "info";
}

std::string rfc3339_ms(std::int64_t wall_us) {
  const time_t secs = static_cast<time_t>(wall_us / 1'000'000);
  tm utc{};
  gmtime_r(&secs, &utc);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>((wall_us / 1000) % 1000));
  return buf;
}

std::int64_t wall_now_us() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

void configure_logging(LogFormat format, LogLevel min_level) {
  g_format = format;
  g_level = min_level;
}

bool log_enabled(LogLevel level) { return level >= g_level; }

std::string format_log_line(LogFormat format, LogLevel level, std::int64_t wall_us,
                            std::string_view msg, std::initializer_list<LogField> fields) {
  if (format == LogFormat::json) {
    // ordered_json keeps ts, level, msg first, as log readers expect.
    nlohmann::ordered_json line;
    line["ts"] = rfc3339_ms(wall_us);
    line["level"] = level_name(level, false);
    line["msg"] = msg;
    for (const auto& [key, value] : fields) line[std::string(key)] = value;
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = rfc3339_ms(wall_us);
  line += ' ';
  line += level_name(level, true);
  line += ' ';
  line += msg;
  for (const auto& [key, value] : fields) {
    line += ' ';
    line += key;
    line += '=';
    line += value;
  }
  return line;
}

void log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (!log_enabled(level)) return;
  std::string line = format_log_line(g_format, level, wall_now_us(), msg, fields);
  line += '\n';
  // One write(2) per line keeps lines from different threads whole.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace ic::config
