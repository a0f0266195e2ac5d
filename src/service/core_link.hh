#pragma once
// What the service layer needs from the thread-per-core runtime to route a
// tenant's call to its owner core and the answer back (docs/architecture.md rules
// 1, 5, 8). An interface so the routing is unit-tested with a manual,
// single-threaded fake; RuntimeLink is the real one.

#include <cstdint>

#include "runtime/runtime.hh"
#include "runtime/task.hh"

namespace ic::service {

class CoreLink {
 public:
  using TimerId = std::uint64_t;
  virtual ~CoreLink() = default;
  // Number of cores (≥ 1).
  virtual unsigned cores() const = 0;
  // Core of the calling thread.
  virtual unsigned current_core() const = 0;
  // Queues `task` on `core`; false (task dropped) when the bounded mailbox is
  // full — the caller sheds load.
  [[nodiscard]] virtual bool post(unsigned core, runtime::Task task) = 0;
  // Runs `task` on the calling core after `delay_us` µs.
  virtual TimerId add_timer(std::int64_t delay_us, runtime::Task task) = 0;
  // Cancels a timer armed on the calling core; no-op if it fired.
  virtual void cancel_timer(TimerId id) = 0;
};

// CoreLink over runtime::Runtime (call only from its reactor threads).
class RuntimeLink final : public CoreLink {
 public:
  explicit RuntimeLink(runtime::Runtime& runtime) : runtime_(runtime) {}
  unsigned cores() const override { return runtime_.cores(); }
  unsigned current_core() const override { return runtime::current_core(); }
  bool post(unsigned core, runtime::Task task) override {
    return runtime_.post(core, std::move(task));
  }
  TimerId add_timer(std::int64_t delay_us, runtime::Task task) override {
    return runtime::current_reactor().add_timer(delay_us, std::move(task));
  }
  void cancel_timer(TimerId id) override { runtime::current_reactor().cancel_timer(id); }

 private:
  runtime::Runtime& runtime_;
};

}  // namespace ic::service
