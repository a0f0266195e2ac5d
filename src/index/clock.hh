#pragma once
// Injectable clocks: the index never reads the system clock itself, so tests
// drive freshness, TTL and deadlines exactly (docs/index.md, docs/lookup.md).

#include <cstdint>

namespace ic::index {

// Source of the two clocks the index needs. Entries' last_seen are producer
// wall-clock µs, so freshness and TTL use wall time; latency and deadlines use
// the monotonic clock.
class Clock {
 public:
  virtual ~Clock() = default;
  // CLOCK_MONOTONIC in µs (latency, deadlines).
  virtual std::int64_t monotonic_us() = 0;
  // CLOCK_REALTIME in µs since the Unix epoch (freshness, TTL, timestamp_us == 0).
  virtual std::int64_t wall_us() = 0;
};

// Reads clock_gettime on every call.
class SystemClock final : public Clock {
 public:
  std::int64_t monotonic_us() override;
  std::int64_t wall_us() override;
};

// Test clock: fixed values; every monotonic_us() read first returns the
// current value and then advances it by `mono_step_us` (0 = frozen), so a test
// can make a deadline pass between two pipeline steps.
class ManualClock final : public Clock {
 public:
  std::int64_t mono = 0;
  std::int64_t wall = 0;
  std::int64_t mono_step_us = 0;
  std::int64_t monotonic_us() override {
    const std::int64_t v = mono;
    mono += mono_step_us;
    return v;
  }
  std::int64_t wall_us() override { return wall; }
};

}  // namespace ic::index
