#include "runtime/timer_heap.hh"

#include <doctest/doctest.h>

#include <string>

using ic::runtime::TimerHeap;

namespace {
// Pops every timer due at `now_us`, running each; returns how many ran.
int run_due(TimerHeap& heap, std::int64_t now_us) {
  int ran = 0;
  while (auto task = heap.pop_due(now_us)) {
    task();
    ++ran;
  }
  return ran;
}
}  // namespace

TEST_SUITE("runtime") {
  TEST_CASE("timer heap fires by deadline, equal deadlines in insertion order") {
    TimerHeap heap;
    std::string order;
    heap.add(30, [&] { order += 'a'; });
    heap.add(10, [&] { order += 'b'; });
    heap.add(20, [&] { order += 'c'; });
    heap.add(10, [&] { order += 'd'; });
    CHECK(heap.size() == 4);
    CHECK(heap.next_deadline() == 10);
    CHECK(run_due(heap, 9) == 0);
    CHECK(run_due(heap, 15) == 2);
    CHECK(order == "bd");
    CHECK(heap.next_deadline() == 20);
    CHECK(run_due(heap, 100) == 2);
    CHECK(order == "bdca");
    CHECK(heap.size() == 0);
    CHECK_FALSE(heap.next_deadline().has_value());
  }

  TEST_CASE("timer heap cancel drops the timer once; ids are not reused") {
    TimerHeap heap;
    std::string order;
    const auto a = heap.add(10, [&] { order += 'a'; });
    const auto b = heap.add(20, [&] { order += 'b'; });
    CHECK(a != 0);
    CHECK(heap.cancel(a));
    CHECK_FALSE(heap.cancel(a));
    CHECK(heap.size() == 1);
    CHECK(heap.next_deadline() == 20);
    const auto c = heap.add(5, [&] { order += 'c'; });
    CHECK(c != a);  // same slot, new generation
    CHECK_FALSE(heap.cancel(a));
    CHECK(run_due(heap, 30) == 2);
    CHECK(order == "cb");
    CHECK_FALSE(heap.cancel(b));  // already fired
  }

  TEST_CASE("timer heap compacts cancelled entries") {
    TimerHeap heap;
    int fired = 0;
    for (int i = 0; i < 10000; ++i) {
      const auto id = heap.add(1000 + i, [&] { ++fired; });
      heap.cancel(id);
    }
    heap.add(5, [&] { ++fired; });
    CHECK(heap.size() == 1);
    CHECK(heap.next_deadline() == 5);
    CHECK(run_due(heap, 1'000'000) == 1);
    CHECK(fired == 1);
  }
}
