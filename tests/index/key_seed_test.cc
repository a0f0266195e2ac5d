// The key table's hash seed is each shard's secret (docs/hostile-peers.md
// "Key table seed"): prefix hashes a peer built to share one probe run under a
// seed it knows spread under another, and the key table and a shard holding
// such a run still answer exactly.

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "helpers.hh"
#include "index/detail/key_table.hh"
#include "index/detail/records.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {
constexpr std::uint64_t kKnownSeed = 0x5EED1DC0FFEEull;  // 0.1's compile-time seed
constexpr std::uint64_t kOtherSeed = 0x0123456789ABCDEFull;
constexpr std::uint32_t kFirstTm = 0;  // a fresh shard's first (tenant, model)
constexpr int kFlood = 1000;

// The multiplicative inverse of odd `a` modulo 2^64 (Newton's iteration).
std::uint64_t inverse(std::uint64_t a) {
  std::uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}

// fmix64⁻¹: each step of MurmurHash3's finalizer undone in reverse order.
std::uint64_t unmix(std::uint64_t h) {
  h ^= h >> 33;
  h *= inverse(0xc4ceb9fe1a85ec53ull);
  h ^= h >> 33;
  h *= inverse(0xff51afd7ed558ccdull);
  h ^= h >> 33;
  return h;
}

// What a peer that knows kKnownSeed sends: the i-th prefix hash whose key
// hash is i << 32, so its low 32 bits (the home slot at every table size) and
// its top 8 (the tag) are all 0. As the uint64 the index reads the 8 wire
// bytes as, and as the big-endian value hb() writes.
std::uint64_t flood_word(int i) {
  return unmix(std::uint64_t(i) << 32) ^ detail::fmix64(kKnownSeed + kFirstTm);
}
std::uint64_t flood_value(int i) { return __builtin_bswap64(flood_word(i)); }

// The home slot of `h` in a table of `slots` (KeyTable::home).
std::size_t home(std::uint64_t h, std::size_t slots) {
  return static_cast<std::size_t>((std::uint64_t{static_cast<std::uint32_t>(h)} * slots) >> 32);
}
}  // namespace

TEST_CASE("prefix hashes built for one home slot under a known seed spread under another") {
  constexpr std::size_t kSlots = 4096;
  std::set<std::size_t> known_homes, other_homes;
  for (int i = 0; i < kFlood; ++i) {
    const std::string bytes = hb(flood_value(i));
    known_homes.insert(home(detail::group_hash(kKnownSeed, kFirstTm, bytes), kSlots));
    other_homes.insert(home(detail::group_hash(kOtherSeed, kFirstTm, bytes), kSlots));
  }
  CHECK(known_homes.size() == 1);
  CHECK(*known_homes.begin() == 0);
  // Exact for these two seeds (a uniform spread of 1000 over 4096 slots gives
  // about 4096 × (1 − e^(−1000/4096)) ≈ 887 distinct).
  CHECK(other_homes.size() == 898);
}

TEST_CASE("the key table finds, erases and re-finds every key of one 1000-key probe run") {
  // The flood's hashes: i << 32, one home slot and one tag (0) at every size.
  std::vector<std::uint64_t> hashes;
  for (int i = 0; i < kFlood; ++i) hashes.push_back(std::uint64_t(i) << 32);
  detail::KeyTable table;
  std::vector<bool> stored(hashes.size(), false);
  auto each_key = [&](auto&& put) {  // growth: every stored key, in key order
    for (std::uint32_t k = 0; k < hashes.size(); ++k) {
      if (stored[k]) put(hashes[k], k);
    }
  };
  auto found = [&](std::uint32_t k) {
    return table.find(hashes[k], [&](std::uint32_t x) { return x == k; }) == k;
  };
  for (std::uint32_t k = 0; k < kFlood; ++k) {
    table.insert(hashes[k], k, each_key);
    stored[k] = true;
  }
  CHECK(table.size() == kFlood);
  int hits = 0;
  for (std::uint32_t k = 0; k < kFlood; ++k) hits += found(k);
  CHECK(hits == kFlood);
  // Erasing every other key shifts the later ones back along the run.
  for (std::uint32_t k = 0; k < kFlood; k += 2) {
    table.erase(hashes[k], k, [&](std::uint32_t x) { return hashes[x]; });
    stored[k] = false;
  }
  CHECK(table.size() == kFlood / 2);
  hits = 0;
  for (std::uint32_t k = 0; k < kFlood; ++k) hits += found(k);
  CHECK(hits == kFlood / 2);
  for (std::uint32_t k = 1; k < kFlood; k += 2) CHECK(found(k));
  // One probe run: the keys left are visited by a walk of the run of any of them.
  int in_run = 0;
  table.for_each_in_run(hashes[1], [&](std::uint32_t) { ++in_run; });
  CHECK(in_run == kFlood / 2);
}

// The same through a shard: its first (tenant, model) takes id 0 (kFirstTm),
// so under the known seed the 1000 keys share one run (the key-table case
// above checks the run itself).
TEST_CASE("a shard holding a flooded probe run finds, evicts and re-finds each key exactly") {
  IndexConfig cfg;
  cfg.key_seed = kKnownSeed;  // the peer's guess is right: all 1000 keys in one run
  Harness h(cfg);
  h.policy(
      R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0,"routingFloorScore":0}]})");
  std::vector<std::pair<std::uint64_t, std::int32_t>> keys;
  for (int i = 0; i < kFlood; ++i) keys.emplace_back(flood_value(i), 16 + i);
  REQUIRE(h.ingest(exact_update("t", "m", "s", "r1", kNow, keys)).entries_upserted == kFlood);

  auto matched = [&](int i) {
    const auto r = h.lookup(exact_req("t", "m", "s", flood_value(i), 16 + i));
    return r.reason_code() == "PREFIX_MATCH" && r.replica_scores_size() == 1 &&
           r.replica_scores(0).matched_tokens() == 16 + i;
  };
  int found = 0;
  for (int i = 0; i < kFlood; ++i) found += matched(i);
  CHECK(found == kFlood);

  // Evicting from the middle of the run shifts the later keys back.
  for (int i = 0; i < kFlood; i += 2) {
    REQUIRE(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(flood_value(i))) == 1);
  }
  int left = 0;
  for (int i = 0; i < kFlood; ++i) left += matched(i);
  CHECK(left == kFlood / 2);
  for (int i = 1; i < kFlood; i += 2) CHECK(matched(i));

  // And the evicted ones come back.
  REQUIRE(h.ingest(exact_update("t", "m", "s", "r1", kNow, keys)).entries_upserted == kFlood);
  found = 0;
  for (int i = 0; i < kFlood; ++i) found += matched(i);
  CHECK(found == kFlood);
}
