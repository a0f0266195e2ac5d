#include "base/log.hh"

#include <doctest/doctest.h>

using ic::base::format_log_line;
using ic::base::LogFormat;
using ic::base::LogLevel;

TEST_SUITE("runtime") {
  // 2026-01-02T03:04:05.678Z
  constexpr std::int64_t kWallUs = 1767323045'678'901;

  TEST_CASE("log lines: JSON keeps ts, level, msg first, then the fields") {
    CHECK(format_log_line(LogFormat::json, LogLevel::warn, kWallUs, "cannot listen",
                          {{"listener", "grpc"}, {"error", "bind \"x\""}}) ==
          R"({"ts":"2026-01-02T03:04:05.678Z","level":"warn","msg":"cannot listen",)"
          R"("listener":"grpc","error":"bind \"x\""})");
  }

  TEST_CASE("log lines: text format") {
    CHECK(format_log_line(LogFormat::text, LogLevel::info, kWallUs, "serving",
                          {{"grpc_port", "9090"}}) ==
          "2026-01-02T03:04:05.678Z INFO serving grpc_port=9090");
  }

  TEST_CASE("log lines: numbers and bools are JSON numbers and bools, text stays a string") {
    CHECK(format_log_line(LogFormat::json, LogLevel::info, kWallUs, "serving",
                          {{"grpc_port", 9090},
                           {"threads", std::size_t{2}},
                           {"grace_s", 1.5},
                           {"tls", false},
                           {"offset", -3},
                           {"auth", "token"}}) ==
          R"({"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"serving",)"
          R"("grpc_port":9090,"threads":2,"grace_s":1.5,"tls":false,"offset":-3,"auth":"token"})");
    CHECK(format_log_line(LogFormat::text, LogLevel::debug, kWallUs, "x",
                          {{"n", 7}, {"ok", true}, {"s", std::string("a b")}}) ==
          "2026-01-02T03:04:05.678Z DEBUG x n=7 ok=true s=a b");
  }

  TEST_CASE("log rate limit: one line per interval, the rest counted into the next") {
    ic::base::LogRateLimit limit(1000);
    std::uint64_t suppressed = 99;
    CHECK(limit.allow(5000, &suppressed));
    CHECK(suppressed == 0);
    CHECK_FALSE(limit.allow(5001, &suppressed));
    CHECK_FALSE(limit.allow(5999, &suppressed));
    CHECK(limit.allow(6000, &suppressed));
    CHECK(suppressed == 2);
    CHECK_FALSE(limit.allow(6500, &suppressed));
    CHECK(limit.allow(9000, &suppressed));
    CHECK(suppressed == 1);
  }

  TEST_CASE("log writer: a full queue drops lines instead of blocking, and counts them") {
    ic::base::configure_logging(LogFormat::json, LogLevel::info);
    const std::uint64_t before = ic::base::log_lines_dropped();
    // A queue smaller than any line: every line is dropped, none blocks.
    ic::base::start_log_writer(8);
    for (int i = 0; i < 5; ++i) ic::base::log(LogLevel::info, "dropped on purpose", {{"i", i}});
    ic::base::stop_log_writer();
    CHECK(ic::base::log_lines_dropped() - before == 5);
    // Stopped: log() writes inline again and drops nothing.
    ic::base::log(LogLevel::debug, "below the level: not written");
    CHECK(ic::base::log_lines_dropped() - before == 5);
  }

  TEST_CASE("log level filter") {
    ic::base::configure_logging(LogFormat::json, LogLevel::warn);
    CHECK_FALSE(ic::base::log_enabled(LogLevel::info));
    CHECK(ic::base::log_enabled(LogLevel::warn));
    CHECK(ic::base::log_enabled(LogLevel::error));
    ic::base::configure_logging(LogFormat::json, LogLevel::info);
  }

  TEST_CASE("log lines: JSON strings escape quotes, controls and invalid UTF-8 as nlohmann did") {
    // Control bytes: by name where JSON has one, else \u00xx; valid UTF-8 as
    // is; each maximal invalid subpart one U+FFFD ("\xE2\x82" is a truncated
    // 3-byte sequence, "\xC0" never starts one, "\xED\xA0\x80" a surrogate).
    CHECK(
        format_log_line(LogFormat::json, LogLevel::info, kWallUs, "a\"b\\c\n\t\x01\x7f",
                        {{"k\x1f", "\xC3\xA9\xE2\x82x\xC0\xED\xA0\x80"}}) ==
        "{\"ts\":\"2026-01-02T03:04:05.678Z\",\"level\":\"info\",\"msg\":"
        "\"a\\\"b\\\\c\\n\\t\\u0001\x7f\","
        "\"k\\u001f\":\"\xC3\xA9\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"}");
  }

  TEST_CASE("log lines: doubles as JSON numbers, non-finite ones as null") {
    CHECK(format_log_line(LogFormat::json, LogLevel::info, kWallUs, "x",
                          {{"a", 2.0},
                           {"b", 1e20},
                           {"c", 1.5e-5},
                           {"d", 0.25},
                           {"e", -0.0},
                           {"f", 1.0 / 0.0},
                           {"g", 123456.5}}) ==
          R"({"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"x",)"
          R"("a":2.0,"b":1e+20,"c":1.5e-05,"d":0.25,"e":-0.0,"f":null,"g":123456.5})");
    CHECK(format_log_line(LogFormat::text, LogLevel::info, kWallUs, "x", {{"grace_s", 2.0}}) ==
          "2026-01-02T03:04:05.678Z INFO x grace_s=2.0");
  }
}
