#pragma once
// The one timer API of a core: a monotonic clock read once per loop turn and
// one-shot timers that fire on the core that armed them. runtime::Reactor
// implements it; src/rpc, src/admin and src/service take a Timers& so their
// unit tests can drive a manual clock instead of a reactor.

#include <cstdint>

#include "runtime/task.hh"

namespace ic::runtime {

class Timers {
 public:
  using TimerId = std::uint64_t;
  virtual ~Timers() = default;
  // Monotonic time in µs (CLOCK_MONOTONIC on a reactor).
  virtual std::int64_t now_us() const = 0;
  // Runs `task` once after `delay_us` (≥ 0) µs on the calling core.
  virtual TimerId add_timer(std::int64_t delay_us, Task task) = 0;
  // Cancels a pending timer of the calling core; no-op if it already fired.
  virtual void cancel_timer(TimerId id) = 0;
};

}  // namespace ic::runtime
