#pragma once
// The clock one LookupRoute call hands the index (index::LookupContext::clock).
// The pipeline reads wall time once, at step 0 (freshness and TTL against the
// producers' wall-clock last_seen, docs/lookup.md), and monotonic time for
// deadlines and at the end (lookup_latency_us). On a reactor core the service
// already knows the call's wall time without reading the clock: the reactor
// read CLOCK_REALTIME and CLOCK_MONOTONIC at the start of this loop turn
// (runtime/runtime.hh Reactor::wall_us), and the call's start is a monotonic
// reading, so wall(start) = turn wall + (start − turn monotonic). A local
// lookup without a deadline then costs two clock reads (start and end)
// instead of three.

#include <cstdint>

#include "index/clock.hh"

namespace ic::service {

class LookupClock final : public index::Clock {
 public:
  // Wall time `wall_us` (µs since the Unix epoch) when ≥ 0; < 0: read from
  // `base` on each wall_us() (a test's ManualClock, or no reactor). Monotonic
  // time is always read from `base`.
  LookupClock(index::Clock& base, std::int64_t wall_us) : base_(base), wall_us_(wall_us) {}

  std::int64_t monotonic_us() override { return base_.monotonic_us(); }
  std::int64_t wall_us() override { return wall_us_ >= 0 ? wall_us_ : base_.wall_us(); }
  // The wall time given at construction (< 0: none), e.g. for the owner
  // core's LookupClock of a call that hops there.
  std::int64_t given_wall_us() const { return wall_us_; }

 private:
  index::Clock& base_;
  std::int64_t wall_us_;
};

// The wall time (µs) at monotonic instant `mono_us`, from one pair of
// readings taken together (`turn_mono_us`, `turn_wall_us`): the wall clock
// advances with the monotonic one between them (both are slewed alike by
// NTP; a step of the wall clock shows from the next pair on).
constexpr std::int64_t wall_at(std::int64_t mono_us, std::int64_t turn_mono_us,
                               std::int64_t turn_wall_us) {
  return turn_wall_us + (mono_us - turn_mono_us);
}

}  // namespace ic::service
