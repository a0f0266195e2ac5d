#pragma once
// Shared by the runtime unit tests: a Runtime's options for the test box and
// the bounded wait that ends a test.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <future>

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

}  // namespace ic::runtime::testing
