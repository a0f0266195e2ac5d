// net::jittered (--max-connection-age's per-connection spread) with fixed draws: exactly
// age ± 10 %, every value of the range reachable, nothing outside it.
#include "net/age_jitter.hh"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>

using ic::net::jittered;

TEST_CASE("jittered: age - 10 % at draw 0, age + 10 % at the top draw, then it wraps") {
  // 3 s: spread 300'000 µs, 600'001 possible values.
  CHECK(jittered(3'000'000, 0) == 2'700'000);
  CHECK(jittered(3'000'000, 300'000) == 3'000'000);
  CHECK(jittered(3'000'000, 600'000) == 3'300'000);
  CHECK(jittered(3'000'000, 600'001) == 2'700'000);
  CHECK(jittered(3'000'000, UINT64_MAX) ==
        2'700'000 + static_cast<std::int64_t>(UINT64_MAX % 600'001));
}

TEST_CASE("jittered: ages under 10 µs are not moved; 10 µs moves by exactly 1") {
  CHECK(jittered(0, 12345) == 0);
  CHECK(jittered(9, 12345) == 9);
  CHECK(jittered(10, 0) == 9);
  CHECK(jittered(10, 1) == 10);
  CHECK(jittered(10, 2) == 11);
  CHECK(jittered(10, 3) == 9);
}

TEST_CASE("next_age_draw: successive connections get different ages, all within ± 10 %") {
  std::set<std::int64_t> ages;
  for (int i = 0; i < 100; ++i) {
    const std::int64_t a = jittered(1'000'000, ic::net::next_age_draw());
    CHECK(a >= 900'000);
    CHECK(a <= 1'100'000);
    ages.insert(a);
  }
  CHECK(ages.size() > 90);  // 200'001 values: 100 draws collide rarely
}
