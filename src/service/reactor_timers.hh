#pragma once
// grpc::Timers on a core's runtime::Reactor (monotonic clock read once per
// loop turn, io_uring timeouts).

#include "grpc/timers.hh"
#include "runtime/runtime.hh"

namespace ic::service {

class ReactorTimers final : public grpc::Timers {
 public:
  // `reactor` outlives this object; used only on its own thread.
  explicit ReactorTimers(runtime::Reactor& reactor) : reactor_(reactor) {}
  std::int64_t now_us() const override { return reactor_.now_us(); }
  TimerId add_timer(std::int64_t delay_us, runtime::Task task) override {
    return reactor_.add_timer(delay_us, std::move(task));
  }
  void cancel_timer(TimerId id) override { reactor_.cancel_timer(id); }

 private:
  runtime::Reactor& reactor_;
};

}  // namespace ic::service
