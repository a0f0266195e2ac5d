// server/idle_collect.hh: when a core that went quiet hands its free heap
// pages back (docs/streams.md "Slow subscribers"). Ticks are fed the core's
// CPU time in µs.

#include "server/idle_collect.hh"

#include <doctest/doctest.h>

using ic::server::QuietTicks;

TEST_CASE("a core collects once, at its first quiet tick after a busy one") {
  QuietTicks q;
  CHECK_FALSE(q.tick(0));        // idle from the start: nothing to hand back
  CHECK_FALSE(q.tick(300'000));  // busy: 30 % of a core
  CHECK(q.tick(400));            // quiet: collect
  CHECK_FALSE(q.tick(400));      // still quiet: once only
  CHECK_FALSE(q.tick(0));
}

TEST_CASE("open connections' timers (a few ms a tick) still count as quiet after a burst") {
  QuietTicks q;
  CHECK_FALSE(q.tick(800'000));
  CHECK_FALSE(q.tick(60'000));  // over 800,000 / 16
  CHECK(q.tick(12'000));        // over 5,000 but at most 800,000 / 16 = 50,000
  // After the collect the timers alone are the busiest tick: never quiet
  // enough again, so a steady light load collects no more.
  for (int i = 0; i < 10; ++i) CHECK_FALSE(q.tick(12'000));
  CHECK(q.tick(5'000));  // the connections gone: quiet, and 120 ms busy before
}

TEST_CASE("a core collects only once it was busy for 20 ms of CPU since the last collect") {
  QuietTicks q;
  CHECK_FALSE(q.tick(12'000));  // 12 ms busy, under 20
  CHECK_FALSE(q.tick(0));
  CHECK_FALSE(q.tick(9'000));  // 21 ms busy
  CHECK(q.tick(0));
}

TEST_CASE("a burst done in a few loop turns still collects: only its CPU time counts") {
  // A fast machine ended 128 subscribers in a handful of turns; their CPU
  // time is what marks the tick busy.
  QuietTicks q;
  CHECK_FALSE(q.tick(150'000));
  CHECK(q.tick(1'000));
}
