#include "runtime/spsc_ring.hh"

#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

using ic::runtime::SpscRing;

TEST_SUITE("runtime") {
  TEST_CASE("spsc ring rounds capacity up to a power of two") {
    CHECK(SpscRing<int>(5).capacity() == 8);
    CHECK(SpscRing<int>(8).capacity() == 8);
    CHECK(SpscRing<int>(0).capacity() == 1);
  }

  TEST_CASE("spsc ring is FIFO and refuses a push when full, leaving the item intact") {
    SpscRing<std::unique_ptr<int>> ring(4);
    for (int i = 0; i < 4; ++i) {
      auto item = std::make_unique<int>(i);
      REQUIRE(ring.try_push(item));
      CHECK(item == nullptr);  // moved in
    }
    auto extra = std::make_unique<int>(99);
    CHECK_FALSE(ring.try_push(extra));
    REQUIRE(extra != nullptr);
    CHECK(*extra == 99);
    CHECK(ring.size_approx() == 4);

    std::unique_ptr<int> out;
    for (int i = 0; i < 4; ++i) {
      REQUIRE(ring.try_pop(out));
      CHECK(*out == i);
    }
    CHECK_FALSE(ring.try_pop(out));
    // Space is reusable after the wrap.
    CHECK(ring.try_push(extra));
    REQUIRE(ring.try_pop(out));
    CHECK(*out == 99);
  }

  TEST_CASE("spsc ring keeps order between two threads") {
    constexpr int kItems = 200000;
    SpscRing<int> ring(64);
    std::thread producer([&ring] {
      for (int i = 0; i < kItems; ++i) {
        int v = i;
        while (!ring.try_push(v)) std::this_thread::yield();
      }
    });
    int expected = 0;
    int mismatches = 0;
    while (expected < kItems) {
      int v = -1;
      if (!ring.try_pop(v)) {
        std::this_thread::yield();
        continue;
      }
      if (v != expected) ++mismatches;
      ++expected;
    }
    producer.join();
    CHECK(mismatches == 0);
    CHECK(expected == kItems);
  }
}
