// Nearest-rank percentiles, the latency summary and the log2 histogram.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/latency.hh"

using namespace ic::tools;

TEST_CASE("nearest-rank percentile") {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 1; i <= 1000; ++i) v.push_back(i);
  CHECK(percentile(v, 0.0) == 1);
  CHECK(percentile(v, 0.5) == 500);
  CHECK(percentile(v, 0.9) == 900);
  CHECK(percentile(v, 0.99) == 990);
  CHECK(percentile(v, 0.999) == 999);
  CHECK(percentile(v, 1.0) == 1000);
  CHECK(percentile({}, 0.5) == 0);
  CHECK(percentile({7}, 0.999) == 7);
  // Ten samples: p50 is the 5th, p99 and p99.9 the 10th.
  std::vector<std::uint64_t> ten{10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  CHECK(percentile(ten, 0.5) == 50);
  CHECK(percentile(ten, 0.51) == 60);
  CHECK(percentile(ten, 0.99) == 100);
}

TEST_CASE("summarize sorts and fills every field") {
  std::vector<std::uint64_t> v{5, 1, 9, 3, 7, 2, 8, 4, 6, 10};
  const auto s = summarize(v);
  CHECK(s.count == 10);
  CHECK(s.min_us == 1);
  CHECK(s.max_us == 10);
  CHECK(s.mean_us == 5);  // 55 / 10 rounded down
  CHECK(s.p50_us == 5);
  CHECK(s.p90_us == 9);
  CHECK(s.p99_us == 10);
  CHECK(s.p999_us == 10);
  CHECK(v.front() == 1);
  const nlohmann::json j = s;
  CHECK(
      j.dump() ==
      R"({"count":10,"max_us":10,"mean_us":5,"min_us":1,"p50_us":5,"p90_us":9,"p999_us":10,"p99_us":10})");
  std::vector<std::uint64_t> empty;
  CHECK(summarize(empty).count == 0);
}

TEST_CASE("log2 histogram buckets") {
  const auto b = log2_histogram({0, 3, 3, 5, 120});
  // [0,1) [1,2) [2,4) [4,8) [8,16) [16,32) [32,64) [64,128)
  REQUIRE(b.size() == 8);
  CHECK(b[0].lower_us == 0);
  CHECK(b[0].upper_us == 1);
  CHECK(b[0].count == 1);
  CHECK(b[2].lower_us == 2);
  CHECK(b[2].upper_us == 4);
  CHECK(b[2].count == 2);
  CHECK(b[3].count == 1);
  CHECK(b[7].lower_us == 64);
  CHECK(b[7].upper_us == 128);
  CHECK(b[7].count == 1);
  CHECK(log2_histogram({}).empty());
  const auto one = log2_histogram({1000});
  REQUIRE(one.size() == 1);
  CHECK(one[0].lower_us == 512);
  CHECK(one[0].upper_us == 1024);
}
