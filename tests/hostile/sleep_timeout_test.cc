// The reactor's sleep timeout against a callee that uses its stack
// (docs/hostile-peers.md "Timers"). The kernel copies the timespec of an
// IORING_OP_TIMEOUT (or its IORING_TIMEOUT_UPDATE) when the SQE is
// submitted, i.e. inside io_uring_submit_and_wait, not when it is prepared:
// a timespec that lived in the frame of the function that prepared the SQE
// is dead by then, and whatever the submit path pushes there becomes the
// deadline. This test's io_uring_submit_and_wait (it replaces liburing's for
// the reactor linked into this executable) fills 512 bytes of fresh stack
// before calling liburing's, as a different liburing or compiler may: a
// timer-only wake-up must still come.

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <liburing.h>

#include <cstring>
#include <string>

#include "../runtime/runtime_fixture.hh"
#include "runtime/runtime.hh"

namespace {

// Writes a pattern over the stack below the caller's frame: where a dead
// local of the caller's previous callee lies.
[[gnu::noinline]] void scribble_stack() {
  volatile unsigned char buf[512];
  std::memset(const_cast<unsigned char*>(buf), 0x5a, sizeof buf);
  asm volatile("" ::: "memory");
}

}  // namespace

extern "C" int io_uring_submit_and_wait(io_uring* ring, unsigned wait_nr) {
  using Fn = int (*)(io_uring*, unsigned);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "io_uring_submit_and_wait"));
  scribble_stack();
  return real(ring, wait_nr);
}

using ic::runtime::current_reactor;
using ic::runtime::Runtime;
using namespace ic::runtime::testing;

TEST_SUITE("hostile") {
  TEST_CASE("a timer wakes an idle reactor whatever the submit path does with the stack") {
    Runtime rt(opts(1));
    Done done;
    int fired = 0;
    rt.start([&](unsigned) {
      // Two sleeps: the first arms the timeout, the second (an earlier
      // timer added from the first's callback) moves it with TIMEOUT_UPDATE.
      current_reactor().add_timer(200'000, [&] {
        ++fired;
        done.set();
      });
      current_reactor().add_timer(20'000, [&] {
        ++fired;
        current_reactor().add_timer(10'000, [&] { ++fired; });
      });
    });
    finish(rt, done);  // fails after 20 s if the reactor slept through its timers
    CHECK(fired == 3);
  }
}
