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

#include "runtime/runtime.hh"
#include "support/runtime_fixture.hh"

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

using namespace ic::runtime::testing;

TEST_SUITE("hostile") {
  TEST_CASE("a timer wakes an idle reactor whatever the submit path does with the stack") {
    // The first sleep arms the timeout (IORING_OP_TIMEOUT).
    Runtime rt(opts(1));
    Done done;
    rt.start([&](unsigned) { current_reactor().add_timer(20'000, [&] { done.set(); }); });
    finish(rt, done);  // fails after 20 s if the reactor slept through its timer
  }

  TEST_CASE("a nearer timer moves the armed timeout whatever the submit path does") {
    // The runtime tests' scenario (runtime_fixture.hh) through this submit
    // path: the armed timeout moved (IORING_TIMEOUT_UPDATE), then a new one.
    CHECK(nearer_timers_fire_first() == "bc");
  }
}
