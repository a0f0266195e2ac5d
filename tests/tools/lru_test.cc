// The simulated engine's LRU KV cache.
#include <doctest/doctest.h>

#include "replay/lru_cache.hh"

using ic::tools::replay::LruBlockCache;

TEST_CASE("leading hits stop at the first missing block") {
  LruBlockCache cache(10);
  std::vector<std::uint64_t> evicted;
  cache.store(std::vector<std::uint64_t>{1, 2, 3}, &evicted);
  CHECK(evicted.empty());
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{1, 2, 3, 4}) == 3);
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{1, 9, 3}) == 1);
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{2, 3}) == 2);
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{7}) == 0);
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{}) == 0);
}

TEST_CASE("the least recently stored or touched block is evicted first") {
  LruBlockCache cache(3);
  std::vector<std::uint64_t> evicted;
  cache.store(std::vector<std::uint64_t>{1, 2, 3}, &evicted);
  cache.store(std::vector<std::uint64_t>{1}, &evicted);  // 1 becomes most recent: order 1,3,2
  cache.store(std::vector<std::uint64_t>{4, 5}, &evicted);
  CHECK(evicted == std::vector<std::uint64_t>{2, 3});
  CHECK(cache.size() == 3);
  CHECK(cache.contains(1));
  CHECK(cache.contains(4));
  CHECK(cache.contains(5));
  CHECK_FALSE(cache.contains(2));
}

TEST_CASE("leading_hits does not refresh recency") {
  LruBlockCache cache(2);
  std::vector<std::uint64_t> evicted;
  cache.store(std::vector<std::uint64_t>{1, 2}, &evicted);
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{1}) == 1);
  cache.store(std::vector<std::uint64_t>{3}, &evicted);
  CHECK(evicted == std::vector<std::uint64_t>{1});
}

TEST_CASE("a request longer than the cache evicts its own first blocks") {
  LruBlockCache cache(2);
  std::vector<std::uint64_t> evicted;
  cache.store(std::vector<std::uint64_t>{1, 2, 3, 4}, &evicted);
  CHECK(evicted == std::vector<std::uint64_t>{1, 2});
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{1, 2, 3, 4}) == 0);
  CHECK(cache.leading_hits(std::vector<std::uint64_t>{3, 4}) == 2);
}

TEST_CASE("capacity 0 is raised to 1") {
  LruBlockCache cache(0);
  CHECK(cache.capacity() == 1);
}
