#include "base/log.hh"

#include "base/json_text.hh"

#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

namespace ic::base {

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

std::int64_t clock_us(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

// A field value as JSON (`json`) or as text: strings, true/false and numbers
// spelled the same in both except that JSON quotes and escapes strings.
void append_value(std::string& out, const LogValue& v, bool json) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (json) {
            append_json_string(out, x);
          } else {
            out += x;
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          append_json_double(out, x);
        } else {
          out += std::to_string(x);
        }
      },
      v.value);
}

void write_all(std::string_view bytes) {
  // One write(2) per line keeps lines from different threads whole; a short
  // write (a pipe) continues with the rest.
  while (!bytes.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, bytes.data(), bytes.size());
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The bounded queue between log() callers and the writer thread.
struct Writer {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;
  std::size_t queued_bytes = 0;
  std::size_t max_bytes = 0;
  std::uint64_t dropped_total = 0;
  std::uint64_t dropped_unreported = 0;
  bool running = false;
  bool stopping = false;
  std::thread thread;

  void run() {
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [this] { return stopping || !lines.empty(); });
      if (lines.empty() && stopping) return;
      std::deque<std::string> batch;
      batch.swap(lines);
      queued_bytes = 0;
      const std::uint64_t dropped = std::exchange(dropped_unreported, 0);
      lock.unlock();
      for (const std::string& line : batch) write_all(line);
      if (dropped > 0) {
        write_all(format_log_line(g_format, LogLevel::warn, clock_us(CLOCK_REALTIME),
                                  "log lines dropped", {{"count", dropped}}) +
                  "\n");
      }
      lock.lock();
    }
  }
};

Writer& writer() {
  static Writer* w = new Writer;  // never destroyed: log() may run during exit
  return *w;
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
    // ts, level, msg first, as log readers expect; then the fields in order.
    std::string line = "{\"ts\":";
    append_json_string(line, rfc3339_ms(wall_us));
    line += ",\"level\":";
    append_json_string(line, level_name(level, false));
    line += ",\"msg\":";
    append_json_string(line, msg);
    for (const auto& [key, value] : fields) {
      line += ',';
      append_json_string(line, key);
      line += ':';
      append_value(line, value, true);
    }
    line += '}';
    return line;
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
    append_value(line, value, false);
  }
  return line;
}

void log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (!log_enabled(level)) return;
  std::string line = format_log_line(g_format, level, clock_us(CLOCK_REALTIME), msg, fields);
  line += '\n';
  Writer& w = writer();
  {
    std::lock_guard lock(w.mu);
    if (w.running) {
      if (w.queued_bytes + line.size() > w.max_bytes) {
        ++w.dropped_total;
        ++w.dropped_unreported;
        return;
      }
      w.queued_bytes += line.size();
      w.lines.push_back(std::move(line));
      w.cv.notify_one();
      return;
    }
  }
  write_all(line);
}

void log_now(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (!log_enabled(level)) return;
  write_all(format_log_line(g_format, level, clock_us(CLOCK_REALTIME), msg, fields) + "\n");
}

void start_log_writer(std::size_t max_queued_bytes) {
  Writer& w = writer();
  std::lock_guard lock(w.mu);
  if (w.running) return;
  w.running = true;
  w.stopping = false;
  w.max_bytes = max_queued_bytes;
  w.thread = std::thread([&w] { w.run(); });
}

void stop_log_writer() {
  Writer& w = writer();
  {
    std::lock_guard lock(w.mu);
    if (!w.running) return;
    w.stopping = true;
    w.cv.notify_one();
  }
  w.thread.join();
  std::lock_guard lock(w.mu);
  w.running = false;
}

std::uint64_t log_lines_dropped() {
  Writer& w = writer();
  std::lock_guard lock(w.mu);
  return w.dropped_total;
}

std::int64_t log_clock_us() { return clock_us(CLOCK_MONOTONIC); }

bool LogRateLimit::allow(std::int64_t now_us, std::uint64_t* suppressed) {
  std::int64_t next = next_us_.load(std::memory_order_relaxed);
  if (now_us >= next &&
      next_us_.compare_exchange_strong(next, now_us + interval_us_, std::memory_order_relaxed)) {
    *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace ic::base
