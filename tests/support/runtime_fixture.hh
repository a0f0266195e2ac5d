#pragma once
// Shared by the runtime unit tests: a Runtime's options for the test box and
// the bounded wait that ends a test.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <vector>

#include "runtime/runtime.hh"

namespace ic::runtime::testing {

// `cores` reactors, mailbox depth `depth` (tasks), threads not pinned: the
// tests share 2 CPUs with the rest of the build.
inline Runtime::Options opts(unsigned cores, std::uint32_t depth = 4096) {
  Runtime::Options o;
  o.cores = cores;
  o.mailbox_depth = depth;
  o.pin_threads = false;
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

}  // namespace ic::runtime::testing
