#pragma once
// Shared by the tests that run a Runtime (tests/runtime, tests/hostile): a
// Runtime's options for the test box, the bounded wait that ends a test, and
// the scenarios more than one of them runs.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.hh"
#include "support/reactor_backend.hh"

namespace ic::runtime::testing {

// The runtime names every such test uses, with `using namespace ic::runtime::testing`.
using ic::runtime::current_core;
using ic::runtime::current_reactor;
using ic::runtime::Runtime;

// `cores` reactors, mailbox depth `depth` (tasks), threads not pinned: the
// tests share 2 CPUs with the rest of the build; the backend of
// IC_REACTOR_BACKEND (support/reactor_backend.hh).
inline Runtime::Options opts(unsigned cores, std::uint32_t depth = 4096) {
  Runtime::Options o;
  o.cores = cores;
  o.mailbox_depth = depth;
  o.pin_threads = false;
  o.backend = ic::testing::reactor_backend();
  return o;
}

// The test's completion signal: set() once, on whichever core finishes last.
struct Done {
  std::promise<void> promise;
  std::future<void> future = promise.get_future();
  void set() { promise.set_value(); }
};

// Waits (up to 20 s) for the test's completion signal, then stops and joins
// the runtime; fails the test if the signal never came.
inline void finish(Runtime& rt, Done& done) {
  const auto status = done.future.wait_for(std::chrono::seconds(20));
  rt.stop();
  rt.join();
  REQUIRE(status == std::future_status::ready);
}

// Two cores, mailbox depth `depth`: core 1 is held (nothing drains its
// mailbox) while a test body runs on core 0, then released; `ran` is what
// core 1 ran, in order.
struct HeldCore1 {
  explicit HeldCore1(std::uint32_t depth) : rt(opts(2, depth)) {}
  // Runs `on_core0` on core 0 with core 1 held, then waits for `done` (finish()).
  template <typename Fn>
  void run_on_core0(Fn on_core0) {
    rt.start([this, &on_core0](unsigned core) {
      if (core == 1) {
        held.wait();
        return;
      }
      on_core0();
      held.count_down();
    });
    finish(rt, done);
  }
  // A task for core 1: records `i`; the one for `last` ends the test.
  auto record(int i, int last) {
    return [this, i, last] {
      ran.push_back(i);
      if (i == last) done.set();
    };
  }

  Runtime rt;
  std::latch held{1};
  Done done;
  std::vector<int> ran;  // core 1 only
};

// One reactor asleep towards a 600 s timer gets a 1 ms timer from a post: the
// io_uring timeout armed for the earliest timer must move earlier
// (IORING_TIMEOUT_UPDATE), and the 1 ms timer that one adds after it fired
// must arm a new timeout. Returns the order the timers fired in, "bc" when
// neither was missed; were one missed, the reactor would sleep towards the
// 600 s timer and finish() would fail the test after 20 s.
inline std::string nearer_timers_fire_first() {
  Runtime rt(opts(1));
  Done done;
  std::string order;
  std::latch armed(1);
  rt.start([&](unsigned) {
    current_reactor().add_timer(600'000'000, [&] { order += 'x'; });
    armed.count_down();
  });
  armed.wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it sleep
  REQUIRE(rt.post(0, [&] {
    current_reactor().add_timer(1'000, [&] {
      order += 'b';
      current_reactor().add_timer(1'000, [&] {
        order += 'c';
        done.set();
      });
    });
  }));
  finish(rt, done);
  return order;
}

}  // namespace ic::runtime::testing
