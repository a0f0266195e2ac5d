// replication::LogBackoff with an explicit clock (µs): which events get a log line, exactly.
#include "replication/log_backoff.hh"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using ic::replication::LogBackoff;

namespace {
// The times among `events` (µs) that get a line, each with its suppressed count.
struct Line {
  std::int64_t at;
  std::uint64_t suppressed;
  bool operator==(const Line&) const = default;
};
std::vector<Line> lines(LogBackoff& b, const std::vector<std::int64_t>& events) {
  std::vector<Line> out;
  for (const std::int64_t t : events) {
    std::uint64_t suppressed = 99;
    if (b.allow(t, &suppressed)) out.push_back({t, suppressed});
  }
  return out;
}
}  // namespace

TEST_CASE("LogBackoff: the first event at once, then after 10, 20, 40, capped at 40") {
  LogBackoff b(10, 40);
  // One event per time unit from 0 to 120.
  std::vector<std::int64_t> every;
  for (std::int64_t t = 0; t <= 120; ++t) every.push_back(t);
  CHECK(lines(b, every) == std::vector<Line>{{0, 0}, {10, 9}, {30, 19}, {70, 39}, {110, 39}});
}

TEST_CASE("LogBackoff: a quiet stretch as long as the wait starts over from the first wait") {
  LogBackoff b(10, 1000);
  std::int64_t next = 0;
  std::uint64_t suppressed = 0;
  REQUIRE(b.allow(0, &suppressed, &next));
  CHECK(next == 10);
  REQUIRE(b.allow(10, &suppressed, &next));
  CHECK(next == 20);  // doubled: next line at 30
  CHECK_FALSE(b.allow(29, &suppressed));
  REQUIRE(b.allow(49, &suppressed, &next));  // before 30 + 20: still the backoff
  CHECK(suppressed == 1);
  CHECK(next == 40);  // next line at 89; quiet from 89 to 129 resets
  REQUIRE(b.allow(129, &suppressed, &next));
  CHECK(suppressed == 0);
  CHECK(next == 10);
}

TEST_CASE("LogBackoff: restart() lets the next event through at once") {
  LogBackoff b(10, 40);
  std::uint64_t suppressed = 0;
  REQUIRE(b.allow(0, &suppressed));
  CHECK_FALSE(b.allow(1, &suppressed));
  b.restart();
  REQUIRE(b.allow(2, &suppressed));
  CHECK(suppressed == 0);
  CHECK_FALSE(b.allow(11, &suppressed));
  CHECK(b.allow(12, &suppressed));
}
