// server/idle_collect.hh: when a core that went quiet hands its free heap
// pages back (docs/streams.md "Slow subscribers").

#include "server/idle_collect.hh"

#include <doctest/doctest.h>

using ic::server::QuietTicks;

TEST_CASE("a core collects once, at its first quiet tick after a busy one") {
  QuietTicks q;
  CHECK_FALSE(q.tick(0));     // idle from the start: nothing to hand back
  CHECK_FALSE(q.tick(5000));  // busy
  CHECK(q.tick(3));           // quiet: collect
  CHECK_FALSE(q.tick(3));     // still quiet: once only
  CHECK_FALSE(q.tick(0));
}

TEST_CASE("open connections' timers (tens of turns a tick) still count as quiet after a burst") {
  QuietTicks q;
  CHECK_FALSE(q.tick(4000));
  CHECK_FALSE(q.tick(1600));  // over 4000 / 16
  CHECK(q.tick(40));          // at most 4000 / 16 = 250
  // After the collect the timers alone are the busiest tick: never quiet
  // enough again, so a steady light load collects no more.
  for (int i = 0; i < 10; ++i) CHECK_FALSE(q.tick(40));
  CHECK(q.tick(8));  // the connections gone: quiet, and 400 busy turns before
}

TEST_CASE("a core collects only once it was busy for 64 turns since the last collect") {
  QuietTicks q;
  CHECK_FALSE(q.tick(30));  // 30 busy turns, under 64
  CHECK_FALSE(q.tick(0));
  CHECK_FALSE(q.tick(40));  // 70 busy turns
  CHECK(q.tick(0));
}
