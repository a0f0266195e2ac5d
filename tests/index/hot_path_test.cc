// The shortcuts of the index's hot paths answer as the plain code would
// (docs/index.md "Floors and the work a block requires"): the scope member an
// update's entries join is remembered between entries, the key table's growth
// places keys ahead of their prefetched slots, a chain walk keeps the
// candidates in local pointers.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "helpers.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {
const char* kNoFloors =
    R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0,"routingFloorScore":0}]})";

// The reference score of the exact key `hash` of (t, m, scheme): 16 tokens,
// fresh, so 16 × dp(holders, replicas serving the scope).
double exact_score(Harness& h, const std::string& scheme, std::uint64_t hash) {
  const auto r = h.lookup(exact_req("t", "m", scheme, hash, 16));
  CAPTURE(r.ShortDebugString());
  REQUIRE(r.reason_code() == "PREFIX_MATCH");
  REQUIRE(r.replica_scores_size() == 1);
  return r.replica_scores(0).score();
}
}  // namespace

TEST_CASE("scope members count each replica's entries when the remembered member is another's") {
  Harness h;
  h.policy(kNoFloors);
  // Scheme a: members [r1, r2]; r2's last entry leaves member 1 remembered.
  h.ingest(exact_update("t", "m", "a", "r2", kNow, {{1, 16}}));
  h.ingest(exact_update("t", "m", "a", "r1", kNow, {{2, 16}}));
  h.ingest(exact_update("t", "m", "a", "r2", kNow, {{3, 16}}));
  // Scheme b: members [r1, r3], where member 1 is r3: r1's second entry must
  // not count for r3.
  h.ingest(exact_update("t", "m", "b", "r3", kNow, {{10, 16}}));
  h.ingest(exact_update("t", "m", "b", "r1", kNow, {{11, 16}}));
  h.ingest(exact_update("t", "m", "b", "r3", kNow, {{12, 16}}));
  h.ingest(exact_update("t", "m", "b", "r1", kNow, {{13, 16}, {14, 16}}));
  CHECK(h.shard->entry_count() == 8);
  // Two replicas serve each scope: one holder scores 16 × dp(1, 2) = 8.
  CHECK(exact_score(h, "a", 2) == doctest::Approx(8.0));
  CHECK(exact_score(h, "b", 12) == doctest::Approx(8.0));
  // r1 holds 3 entries of scheme b: it serves b until the last one goes.
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(11)) == 1);
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(13)) == 1);
  CHECK(exact_score(h, "b", 12) == doctest::Approx(8.0));
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(14)) == 1);
  // r3 alone serves b now (dp 1); r1 still serves a.
  CHECK(exact_score(h, "b", 12) == doctest::Approx(16.0));
  CHECK(exact_score(h, "a", 2) == doctest::Approx(8.0));
  // r3 held 2 entries of b: both still answer, and it leaves b with them.
  CHECK(exact_score(h, "b", 10) == doctest::Approx(16.0));
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "r3") == 2);
  CHECK(h.lookup(exact_req("t", "m", "b", 10, 16)).reason_code() == "UNKNOWN_HASH_SCHEME");
}

TEST_CASE("the key table grows through many sizes: every key and every group's run stays whole") {
  Harness h;
  h.policy(kNoFloors);
  // 3,000 groups of two keys (the same bytes in schemes a and b): the table
  // grows from 16 slots by 1.5× about fifteen times, re-placing each key.
  constexpr std::uint64_t kGroups = 3000;
  for (std::uint64_t g = 0; g < kGroups; ++g) {
    h.ingest(exact_update("t", "m", "a", "r1", kNow, {{g, 16}}));
    h.ingest(exact_update("t", "m", "b", "r2", kNow, {{g, 16}}));
  }
  REQUIRE(h.shard->entry_count() == static_cast<std::int64_t>(2 * kGroups));
  for (std::uint64_t g = 0; g < kGroups; ++g) {
    CAPTURE(g);
    const auto a = h.lookup(exact_req("t", "m", "a", g, 16));
    REQUIRE(a.replica_scores_size() == 1);
    CHECK(a.replica_scores(0).replica_id() == "r1");
    const auto b = h.lookup(exact_req("t", "m", "b", g, 16));
    REQUIRE(b.replica_scores_size() == 1);
    CHECK(b.replica_scores(0).replica_id() == "r2");
  }
  // PREFIX_EVICTED walks a group's run in either scheme: each removes the
  // named replica's key, the other scheme's key stays.
  for (std::uint64_t g = 0; g < kGroups; g += 2) {
    CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(g)) == 1);
  }
  CHECK(h.shard->entry_count() == static_cast<std::int64_t>(2 * kGroups - kGroups / 2));
  CHECK(h.lookup(exact_req("t", "m", "a", 0, 16)).reason_code() == "AFFINITY_HINT");  // a miss
  CHECK(h.lookup(exact_req("t", "m", "a", 1, 16)).replica_scores_size() == 1);
  CHECK(h.lookup(exact_req("t", "m", "b", 0, 16)).replica_scores_size() == 1);
}

TEST_CASE("a chain walk matches replicas listed in different orders per block") {
  Harness h;
  h.policy(kNoFloors);
  // Block 1's key lists r1 (inline), r3, r2 (spills, newest first); block
  // 2's r3, r1, r2; block 3's r2, r1: the candidates are reordered as the
  // walk meets them, and r2's re-report 6 minutes old sets its freshness.
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, {1}));
  h.ingest(chain_update("t", "m", "vllm", "r2", kNow, {1}));
  h.ingest(chain_update("t", "m", "vllm", "r3", kNow, {1}));
  h.ingest(chain_update("t", "m", "vllm", "r3", kNow, {1, 2}));
  h.ingest(chain_update("t", "m", "vllm", "r2", kNow - 6 * kMin, {1, 2, 3}));
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, {1, 2, 3, 4}));
  const auto r = h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4, 5}));
  // Three serve: r1 runs 4 blocks (m = 1, dp 2/3), r2 3 blocks at freshness
  // 0.8 (m = 2, dp 1/3), r3 2 blocks (m = 3, dp 0).
  check_scores(r, {{"r1", 64 * (2.0 / 3), 64, 1.0, pb::CACHE_TIER_T1},
                   {"r2", 48 * 0.8 * (1.0 / 3), 48, 0.8, pb::CACHE_TIER_T1},
                   {"r3", 0.0, 32, 1.0, pb::CACHE_TIER_T1}});
}
