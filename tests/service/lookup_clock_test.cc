// The clock of one LookupRoute call (service/lookup_clock.hh): the wall time
// given by the caller is served without a read, monotonic time always reads
// the base clock, and without a given wall time every read goes to the base.

#include "service/lookup_clock.hh"

#include <doctest/doctest.h>

namespace {

using ic::index::ManualClock;
using ic::service::LookupClock;
using ic::service::wall_at;

TEST_CASE("lookup_clock: a given wall time is served as is, monotonic reads the base") {
  ManualClock base;
  base.mono = 5'000;
  base.wall = 1'700'000'000'000'000;
  base.mono_step_us = 7;
  LookupClock clock(base, 1'600'000'000'000'123);
  CHECK(clock.given_wall_us() == 1'600'000'000'000'123);
  CHECK(clock.wall_us() == 1'600'000'000'000'123);
  base.wall = 42;  // not read again
  CHECK(clock.wall_us() == 1'600'000'000'000'123);
  CHECK(clock.monotonic_us() == 5'000);
  CHECK(clock.monotonic_us() == 5'007);
  CHECK(base.mono == 5'014);
}

TEST_CASE("lookup_clock: no wall time given (< 0): every wall read goes to the base") {
  ManualClock base;
  base.wall = 1'700'000'000'000'000;
  LookupClock clock(base, -1);
  CHECK(clock.given_wall_us() == -1);
  CHECK(clock.wall_us() == 1'700'000'000'000'000);
  base.wall += 250;
  CHECK(clock.wall_us() == 1'700'000'000'000'250);
}

TEST_CASE("lookup_clock: wall_at advances the turn's wall reading by the monotonic time since") {
  // Turn read at monotonic 1'000'000 µs, wall 1.7e15 µs; a call starting 37 µs
  // later has wall time 37 µs later.
  CHECK(wall_at(1'000'037, 1'000'000, 1'700'000'000'000'000) == 1'700'000'000'000'037);
  CHECK(wall_at(1'000'000, 1'000'000, 1'700'000'000'000'000) == 1'700'000'000'000'000);
  static_assert(wall_at(10, 4, 100) == 106);
}

}  // namespace
