#include "config/log.hh"

#include <doctest.h>

using ic::config::format_log_line;
using ic::config::LogFormat;
using ic::config::LogLevel;

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

  TEST_CASE("log level filter") {
    ic::config::configure_logging(LogFormat::json, LogLevel::warn);
    CHECK_FALSE(ic::config::log_enabled(LogLevel::info));
    CHECK(ic::config::log_enabled(LogLevel::warn));
    CHECK(ic::config::log_enabled(LogLevel::error));
    ic::config::configure_logging(LogFormat::json, LogLevel::info);
  }
}
