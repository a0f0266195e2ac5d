#pragma once
// The clock and timers a gRPC session needs for call deadlines. In the server
// it is the connection core's Reactor (service/reactor_timers.hh); tests use a
// manual clock. Abstract so src/grpc does not depend on the io_uring runtime.

#include <cstdint>

#include "runtime/task.hh"

namespace ic::grpc {

class Timers {
 public:
  using TimerId = std::uint64_t;
  virtual ~Timers() = default;
  // Monotonic time in µs.
  virtual std::int64_t now_us() const = 0;
  // Runs `task` once after `delay_us` (≥ 0) µs on this core.
  virtual TimerId add_timer(std::int64_t delay_us, runtime::Task task) = 0;
  // Cancels a pending timer; no-op if it already fired.
  virtual void cancel_timer(TimerId id) = 0;
};

}  // namespace ic::grpc
