// Ingest rules, events, GetCacheState, TTL, cap and quota eviction, LFU
// credit, /snapshot rows and metrics aggregates (docs/index.md, docs/admin.md).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "helpers.hh"
#include "index/partition.hh"

using namespace ic::index;
using namespace ic::index::test;
using T = pb::CacheTier;

namespace {
bool matches(Harness& h, const pb::LookupRouteRequest& r, const std::string& replica) {
  auto resp = h.lookup(r);
  for (const auto& s : resp.replica_scores())
    if (s.replica_id() == replica && resp.reason_code() == reason::kPrefixMatch) return true;
  return false;
}
// Builds "<prefix><i>" (sidesteps a GCC 12 -Wrestrict false positive on
// operator+ with std::to_string at -O3).
std::string named(const char* prefix, int i) {
  std::string s(prefix);
  s.append(std::to_string(i));
  return s;
}
const char* kNoFloors =
    R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0,"routingFloorScore":0}]})";
}  // namespace

TEST_CASE("ingest: chain + prefix_hash, legacy, malformed, empty scheme, counts") {
  Harness h;
  h.policy(kNoFloors);
  auto u = chain_update("t", "m", "vllm", "r1", kNow, {1, 2, 3}, 0, "", 10);
  u.mutable_prefixes(0)->set_prefix_hash(hb(99));
  auto* bad = u.add_prefixes();  // malformed chain: dropped, no fallback to prefix_hash
  bad->add_block_hashes(hb(50));
  bad->set_prefix_hash(hb(51));
  auto* legacy = u.add_prefixes();
  legacy->set_prefix_hash(hb(60));
  legacy->set_token_count(77);
  auto res = h.ingest(u);
  CHECK(res.entries_upserted == 5);
  CHECK(res.prefixes_dropped == 1);
  CHECK(h.shard->entry_count() == 5);
  CHECK(h.shard->key_count() == 5);
  // Block j carries the cumulative count; prefix_hash carries the total.
  check_scores(h.lookup(exact_req("t", "m", "vllm", 2, 0)), {{"r1", 20, 20, 1, T::CACHE_TIER_T1}});
  check_scores(h.lookup(exact_req("t", "m", "vllm", 99, 0)), {{"r1", 30, 30, 1, T::CACHE_TIER_T1}});
  check_scores(h.lookup(exact_req("t", "m", "vllm", 60, 0)), {{"r1", 77, 77, 1, T::CACHE_TIER_T1}});
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 51, 0), "r1"));
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 50, 0), "r1"));

  // Empty hash_scheme: prefixes dropped, stats applied.
  auto e = chain_update("t", "m", "", "r2", kNow, {1});
  e.mutable_stats()->set_hit_rate(0.5f);
  res = h.ingest(e);
  CHECK(res.prefixes_dropped == 1);
  CHECK(res.entries_upserted == 0);
  CHECK(h.shard->entry_count() == 5);
  pb::GetCacheStateResponse out = h.cache_state("t", "m");
  REQUIRE(out.replicas_size() == 1);
  CHECK(out.replicas(0).replica_id() == "r2");

  // Updates are additive: a later update without a prefix does not remove it.
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{61, 5}}));
  CHECK(h.shard->entry_count() == 6);
  CHECK(matches(h, exact_req("t", "m", "vllm", 60, 0), "r1"));

  // Hashes are opaque bytes of any length, matched within one scheme.
  pb::CacheStateUpdate odd = scoped_update("t", "m", "sglang", "r3", kNow);
  auto* p = odd.add_prefixes();
  p->set_prefix_hash(std::string(32, 'x'));
  p->set_token_count(40);
  p = odd.add_prefixes();
  p->set_prefix_hash("abc");
  p->set_token_count(41);
  h.ingest(odd);
  pb::LookupRouteRequest q = scoped_lookup("t", "m", "sglang");
  q.set_prefix_hash(std::string(32, 'x'));
  check_scores(h.lookup(q), {{"r3", 40, 40, 1, T::CACHE_TIER_T1}});
  q.set_prefix_hash("abc");
  check_scores(h.lookup(q), {{"r3", 41, 41, 1, T::CACHE_TIER_T1}});
  q.set_hash_scheme("vllm");
  CHECK(h.lookup(q).reason_code() != reason::kPrefixMatch);
}

TEST_CASE("ingest: timestamp 0 is now; stats NaN/Inf → 0 and replica forced; GetCacheState") {
  Harness h;
  h.policy(kNoFloors);
  h.ingest(chain_update("t", "m", "vllm", "r1", 0, {1}));
  auto r = h.lookup(exact_req("t", "m", "vllm", 1, 16));
  CHECK(r.replica_scores(0).estimated_cache_hit_prob() == 1.0f);
  h.clock.wall += 15 * kMin;  // half the TTL later
  r = h.lookup(exact_req("t", "m", "vllm", 1, 16));
  CHECK(r.replica_scores(0).estimated_cache_hit_prob() == doctest::Approx(0.5));

  pb::CacheStateUpdate s = scoped_update("t", "m", "sglang", "r2", kNow);
  auto* st = s.mutable_stats();
  st->set_replica_id("spoofed");
  st->set_hit_rate(std::numeric_limits<float>::quiet_NaN());
  st->set_pressure(std::numeric_limits<float>::infinity());
  st->set_cache_memory_bytes(1234);
  st->set_t2_hit_tokens(5);
  st->set_t2_query_tokens(9);
  h.ingest(s);
  s.set_replica_id("r0");
  st->set_hit_rate(0.25f);
  st->set_pressure(-std::numeric_limits<float>::infinity());
  h.ingest(s);
  pb::GetCacheStateResponse out = h.cache_state("t", "m");
  CHECK(out.summary().total_prefixes() == 1);
  CHECK(out.summary().hot_prefixes() == 0);
  REQUIRE(out.replicas_size() == 2);
  CHECK(out.replicas(0).replica_id() == "r0");
  CHECK(out.replicas(0).hit_rate() == 0.25f);
  CHECK(out.replicas(0).pressure() == 0.0f);
  CHECK(out.replicas(1).replica_id() == "r2");
  CHECK(out.replicas(1).hit_rate() == 0.0f);
  CHECK(out.replicas(1).pressure() == 0.0f);
  CHECK(out.replicas(1).cache_memory_bytes() == 1234);
  CHECK(out.replicas(1).t2_hit_tokens() == 5);
  CHECK(out.replicas(1).t2_query_tokens() == 9);
  out = h.cache_state("t", "nope");
  CHECK(out.replicas_size() == 0);
  CHECK(out.summary().total_prefixes() == 0);
}

// One stats-only update of `replica` for (tenant, model) with `hit_rate`.
pb::CacheStateUpdate stats_update(const std::string& tenant, const std::string& model,
                                  const std::string& replica, std::int64_t ts, float hit_rate) {
  pb::CacheStateUpdate u = scoped_update(tenant, model, "vllm", replica, ts);
  u.mutable_stats()->set_hit_rate(hit_rate);
  return u;
}

TEST_CASE("stats entries: bounded per (tenant, model) and per shard; refused ones leave no trace") {
  IndexConfig cfg;
  cfg.max_stats_per_model = 2;
  cfg.max_stats_entries = 3;
  Harness h(cfg);
  h.ingest(stats_update("t", "m", "r1", kNow, 0.1f));
  h.ingest(stats_update("t", "m", "r2", kNow, 0.2f));
  // A third replica of (t, m): its stats are refused, its entries kept.
  pb::CacheStateUpdate third = chain_update("t", "m", "vllm", "r3", kNow, {7});
  third.mutable_stats()->set_hit_rate(0.3f);
  CHECK(h.ingest(third).entries_upserted == 1);
  CHECK(h.shard->stats_refused() == 1);
  CHECK(h.shard->stats_entry_count() == 2);
  // Stats already held keep being refreshed at the bound.
  h.ingest(stats_update("t", "m", "r1", kNow, 0.5f));
  pb::GetCacheStateResponse out = h.cache_state("t", "m");
  CHECK(out.summary().total_prefixes() == 1);
  REQUIRE(out.replicas_size() == 2);
  CHECK(out.replicas(0).replica_id() == "r1");
  CHECK(out.replicas(0).hit_rate() == 0.5f);
  CHECK(out.replicas(1).replica_id() == "r2");
  CHECK(h.shard->stats_refused() == 1);

  // The shard's bound: one more entry of another tenant, then none.
  h.ingest(stats_update("u", "m", "r1", kNow, 0.4f));
  CHECK(h.shard->stats_entry_count() == 3);
  h.ingest(stats_update("v", "m", "r1", kNow, 0.6f));
  CHECK(h.shard->stats_refused() == 2);
  CHECK(h.shard->stats_entry_count() == 3);
  // The refused stats-only update of tenant v made no (tenant, model) record.
  CHECK(h.cache_state("v", "m").replicas_size() == 0);
  std::vector<std::string> tenants;
  for (const TenantRow& row : h.shard->collect_snapshot().tenants) tenants.push_back(row.tenant_id);
  std::sort(tenants.begin(), tenants.end());
  CHECK(tenants == std::vector<std::string>{"t", "u"});

  // Room comes back as entries go: ALL_CLEARED of (t, m, r2), then the TTL.
  h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "r2");
  CHECK(h.shard->stats_entry_count() == 2);
  h.ingest(stats_update("v", "m", "r1", kNow, 0.6f));
  CHECK(h.shard->stats_entry_count() == 3);
  CHECK(h.cache_state("v", "m").replicas_size() == 1);
  h.shard->sweep_slice(kNow + 31 * kMin, 1000);
  CHECK(h.shard->stats_entry_count() == 0);
  h.ingest(stats_update("t", "m", "r3", kNow + 31 * kMin, 0.3f));
  CHECK(h.shard->stats_entry_count() == 1);
  CHECK(h.shard->stats_refused() == 2);
}

TEST_CASE("stats entries: refused stats of new (tenant, model)s intern no name") {
  IndexConfig cfg;
  cfg.max_stats_entries = 2;
  Harness h(cfg);
  h.ingest(stats_update("a", "m", "r1", kNow, 0.1f));
  h.ingest(stats_update("b", "m", "r1", kNow, 0.1f));
  for (int i = 0; i < 1000; ++i) {
    h.ingest(stats_update(named("t", i), named("model", i), named("r", i), kNow, 0.2f));
  }
  CHECK(h.shard->stats_refused() == 1000);
  CHECK(h.shard->stats_entry_count() == 2);
  // Only m, whose stats are held: no name of the refused ones was interned,
  // so none is reported, not even as drained (0).
  std::vector<std::string> models;
  h.shard->for_each_model_keys([&](std::string_view m, std::int64_t) { models.emplace_back(m); });
  CHECK(models == std::vector<std::string>{"m"});
  std::vector<std::string> tenants;
  for (const TenantRow& row : h.shard->collect_snapshot().tenants) tenants.push_back(row.tenant_id);
  std::sort(tenants.begin(), tenants.end());
  CHECK(tenants == std::vector<std::string>{"a", "b"});
}

TEST_CASE("stats entries: the count equals the entries held under random ingest, events and TTL") {
  IndexConfig cfg;
  cfg.max_stats_per_model = 3;
  cfg.max_stats_entries = 7;
  cfg.max_entries = 40;
  Harness h(cfg);
  std::uint64_t x = 12345;  // xorshift64: the same sequence on every run
  auto rnd = [&x](std::uint64_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x % n;
  };
  std::int64_t t = kNow;
  for (int i = 0; i < 20000; ++i) {
    const std::string tenant = named("t", static_cast<int>(rnd(5)));
    const std::string model = named("m", static_cast<int>(rnd(3)));
    const std::string replica = named("r", static_cast<int>(rnd(9)));
    t += static_cast<std::int64_t>(rnd(3)) * kMin / 4;
    h.clock.wall = t;
    switch (rnd(6)) {
      case 0:
        h.ingest(stats_update(tenant, model, replica, t, 0.1f));
        break;
      case 1: {
        pb::CacheStateUpdate u =
            chain_update(tenant, model, "vllm", replica, t, {rnd(20), rnd(20)});
        if (rnd(2) == 1) u.mutable_stats()->set_pressure(static_cast<float>(rnd(4)) / 4);
        h.ingest(u);
        break;
      }
      case 2:
        h.event(pb::CacheEvent::ALL_CLEARED, tenant, model, replica);
        break;
      case 3:
        h.event(pb::CacheEvent::PREFIX_EVICTED, tenant, model, replica, hb(rnd(20)));
        break;
      case 4:
        h.shard->sweep_slice(t, 1 + rnd(50));
        break;
      default:
        h.shard->sweep_slice(t + 31 * kMin * static_cast<std::int64_t>(rnd(2)), 1000);
        break;
    }
    std::size_t held = 0;
    h.shard->export_stats([&held](const StatsView&) { ++held; });
    INFO("step " << i);
    REQUIRE(held == h.shard->stats_entry_count());
    REQUIRE(held <= cfg.max_stats_entries);
  }
  CHECK(h.shard->stats_refused() > 0);
}

TEST_CASE("GetCacheState counts distinct keys over schemes and adapters, not entries") {
  Harness h;
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{1, 16}, {2, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r2", kNow, {{1, 16}}));          // same key
  h.ingest(exact_update("t", "m", "sglang", "r1", kNow, {{1, 16}}));        // other scheme
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{1, 16}}, 0, "a"));  // other adapter
  h.ingest(exact_update("t", "m2", "vllm", "r1", kNow, {{1, 16}}));         // other model
  pb::GetCacheStateResponse out = h.cache_state("t", "m");
  CHECK(out.summary().total_prefixes() == 4);
  CHECK(h.shard->entry_count() == 6);
  CHECK(h.shard->key_count() == 5);
}

TEST_CASE("events: PREFIX_EVICTED by secondary map, adapters, REPLICA_UPDATED, ALL_CLEARED") {
  Harness h;
  h.policy(kNoFloors);
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{1, 16}, {2, 16}}));
  h.ingest(exact_update("t", "m", "sglang", "r1", kNow, {{1, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{1, 16}}, 0, "lora"));
  h.ingest(exact_update("t", "m", "vllm", "r2", kNow, {{1, 16}}));
  h.ingest(exact_update("t", "m2", "vllm", "r1", kNow, {{1, 16}}));
  CHECK(h.shard->entry_count() == 6);

  // PREFIX_ADDED and unknown types are no-ops.
  CHECK(h.event(pb::CacheEvent::PREFIX_ADDED, "t", "m", "r1", hb(1)) == 0);
  CHECK(h.event(static_cast<pb::CacheEvent::Type>(42), "t", "m", "r1", hb(1)) == 0);
  CHECK(h.event(pb::CacheEvent::TYPE_UNSPECIFIED, "t", "m", "r1", hb(1)) == 0);
  // Adapter set: only that partition.
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(1), "lora") == 1);
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(1), "unknown-adapter") == 0);
  // Adapter empty: every scheme and partition of (t, m), only this replica.
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{1, 16}}, 0, "lora"));
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(1)) == 3);
  CHECK(h.shard->entry_count() == 3);  // r1:2 (vllm), r2:1, m2 r1:1 → minus... see below
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 1, 16), "r1"));
  CHECK(matches(h, exact_req("t", "m", "vllm", 1, 16), "r2"));
  CHECK(matches(h, exact_req("t", "m2", "vllm", 1, 16), "r1"));
  CHECK(matches(h, exact_req("t", "m", "vllm", 2, 16), "r1"));

  // REPLICA_UPDATED: liveness of existing stats only; nothing created.
  CHECK(h.event(pb::CacheEvent::REPLICA_UPDATED, "t", "m", "r1", "", "", kNow + 5) == 0);
  pb::GetCacheStateResponse out = h.cache_state("t", "m");
  CHECK(out.replicas_size() == 0);
  pb::CacheStateUpdate s;
  s.set_tenant_id("t");
  s.set_model_id("m");
  s.set_replica_id("r1");
  s.set_timestamp_us(kNow - 40 * kMin);
  s.mutable_stats()->set_hit_rate(0.5f);
  h.ingest(s);
  h.event(pb::CacheEvent::REPLICA_UPDATED, "t", "m", "r1", "", "", kNow);
  // The stats survive a sweep because liveness was refreshed (TTL 30 min).
  while (!h.shard->sweep_slice(h.clock.wall, 1000)) {
  }
  out = h.cache_state("t", "m");
  CHECK(out.replicas_size() == 1);

  // ALL_CLEARED: every key of (t, m) for r1, all schemes/adapters, and its stats.
  h.ingest(exact_update("t", "m", "sglang", "r1", kNow, {{7, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{8, 16}}, 0, "lora"));
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "r1") == 3);
  out = h.cache_state("t", "m");
  CHECK(out.replicas_size() == 0);
  CHECK(out.summary().total_prefixes() == 1);  // r2's key 1
  CHECK(matches(h, exact_req("t", "m2", "vllm", 1, 16), "r1"));
  CHECK(h.shard->entry_count() == 2);
}

TEST_CASE("TTL: linear freshness, absent at age ≥ ttl before the sweep, sweep slices, policy TTL") {
  Harness h;
  h.policy(kNoFloors);
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow - 10 * kMin, {{1, 100}}));
  h.ingest(exact_update("t", "m", "vllm", "r2", kNow - 30 * kMin, {{1, 100}}));
  h.ingest(exact_update("t", "m", "vllm", "r3", kNow + 5 * kMin, {{1, 100}}));  // future: fresh 1
  // t = 3 (r2 still a member until swept), m = 2 fresh holders → dp 1/3.
  check_scores(h.lookup(exact_req("t", "m", "vllm", 1, 100)),
               {{"r3", 100.0 / 3, 100, 1, T::CACHE_TIER_T1},
                {"r1", 100 * (2.0 / 3) / 3, 100, 2.0 / 3, T::CACHE_TIER_T1}});
  // Sweep in slices of 1 entry slot: the third slice ends the pass.
  CHECK_FALSE(h.shard->sweep_slice(h.clock.wall, 1));
  CHECK(h.shard->entry_count() == 3);
  CHECK_FALSE(h.shard->sweep_slice(h.clock.wall, 1));
  CHECK(h.shard->entry_count() == 2);  // r2's slot
  CHECK(h.shard->sweep_slice(h.clock.wall, 1));
  CHECK(h.shard->entry_count() == 2);
  CHECK(h.shard->eviction_counters().lru_ttl == 1);
  check_scores(h.lookup(exact_req("t", "m", "vllm", 1, 100)),
               {{"r1", 0, 100, 2.0 / 3, T::CACHE_TIER_T1},
                {"r3", 0, 100, 1, T::CACHE_TIER_T1}});  // t = 2, m = 2: dp 0, ties by id
  // Per-tenant evictionTTL (ns) and LFU labels the ttl evictions.
  h.policy(
      R"({"version":7,"policies":[{"namespace":"t","evictionTTL":600000000000,"eviction":"lfu","minimumMatchedTokens":0,"routingFloorScore":0}]})");
  // TTL 10 min: r1 (age 10 min) is now absent, r3 is fresh.
  check_scores(h.lookup(exact_req("t", "m", "vllm", 1, 100)),
               {{"r3", 50, 100, 1, T::CACHE_TIER_T1}});
  while (!h.shard->sweep_slice(h.clock.wall, 100)) {
  }
  CHECK(h.shard->eviction_counters().lfu_ttl == 1);
  CHECK(h.shard->entry_count() == 1);
  // Time passes: everything expires, the index is empty again (cold start).
  h.clock.wall += 16 * kMin;
  CHECK(h.shard->sweep_slice(h.clock.wall, 100));
  CHECK(h.shard->entry_count() == 0);
  CHECK(h.shard->key_count() == 0);
  CHECK(h.lookup(exact_req("t", "m", "vllm", 1, 100)).reason_code() == reason::kNoHint);
  CHECK(h.lookup(exact_req("zz", "m", "vllm", 1, 100)).reason_code() == reason::kNoHint);
}

TEST_CASE(
    "cap: a stream of 2× the cap keeps the count at the cap, oldest first, ties by key bytes") {
  IndexConfig cfg;
  cfg.max_entries = 10;
  Harness h(cfg);
  h.policy(kNoFloors);
  for (int i = 0; i < 20; ++i) {
    // Timestamps ascend except every 5th, which is older than everything.
    const std::int64_t ts = i % 5 == 4 ? kNow - 100 * kMin + i : kNow - 20 * kMin + i * kMin;
    h.ingest(exact_update("t", "m", "vllm", "r", ts, {{static_cast<std::uint64_t>(1000 + i), 16}}));
    CHECK(h.shard->entry_count() <= 10);
  }
  CHECK(h.shard->entry_count() == 10);
  CHECK(h.shard->eviction_counters().lru_cap == 10);
  // Survivors: the 10 newest of the non-old ones: i in {5..8, 10..13, 15..18} minus the 2 oldest.
  std::vector<int> alive;
  for (int i = 0; i < 20; ++i) {
    pb::LookupRouteRequest r = exact_req("t", "m", "vllm", 1000 + i, 16);
    if (h.lookup(r).reason_code() == reason::kPrefixMatch) alive.push_back(i);
  }
  CHECK(alive == std::vector<int>{7, 8, 10, 11, 12, 13, 15, 16, 17, 18});

  // Equal last_seen: ties break by key bytes, then replica id.
  Harness t(cfg);
  t.policy(kNoFloors);
  for (int i = 0; i < 10; ++i)
    t.ingest(exact_update("t", "m", "vllm", "r", kNow, {{static_cast<std::uint64_t>(50 - i), 16}}));
  t.ingest(exact_update("t", "m", "vllm", "q", kNow, {{41, 16}, {90, 16}}));
  CHECK(t.shard->entry_count() == 10);
  // Victims: key 41 (q before r), then key 41 of r.
  CHECK_FALSE(matches(t, exact_req("t", "m", "vllm", 41, 16), "q"));
  CHECK_FALSE(matches(t, exact_req("t", "m", "vllm", 41, 16), "r"));
  CHECK(matches(t, exact_req("t", "m", "vllm", 42, 16), "r"));
  CHECK(matches(t, exact_req("t", "m", "vllm", 90, 16), "q"));
}

TEST_CASE("cap: memory stays flat over repeated cycles of 2× the cap") {
  // Each cycle streams 2× the cap of new 16-block chains; after the first two
  // cycles have sized the slabs, tables and victim heap, the index's heap
  // footprint must not move: evicted slots are reused, nothing accumulates.
  IndexConfig cfg;
  cfg.max_entries = 4096;
  Harness h(cfg);
  h.policy(kNoFloors);
  std::uint64_t next_block = 1;
  std::int64_t ts = kNow - 60 * kMin;
  std::vector<std::size_t> footprint;
  for (int cycle = 0; cycle < 8; ++cycle) {
    for (int u = 0; u < 2 * 4096 / 16; ++u) {
      std::vector<std::uint64_t> blocks(16);
      for (auto& b : blocks) b = next_block++;
      h.ingest(chain_update("t", "m", "vllm", named("r", u % 8), ts++, blocks));
      REQUIRE(h.shard->entry_count() <= 4096);
    }
    CHECK(h.shard->entry_count() == 4096);
    footprint.push_back(h.shard->memory_bytes());
  }
  CHECK(h.shard->eviction_counters().lru_cap == 8u * 2 * 4096 - 4096);
  for (int cycle = 2; cycle < 8; ++cycle) CHECK(footprint[cycle] == footprint[1]);
}

TEST_CASE("cap: refreshed entries move to the back; a late old report is evicted first") {
  IndexConfig cfg;
  cfg.max_entries = 3;
  Harness h(cfg);
  h.policy(kNoFloors);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 5, {{1, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 4, {{2, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 3, {{3, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 2, {{4, 16}}));  // evicts 1 (builds heap)
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 1, 16), "r"));
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{2, 16}}));      // refresh 2
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 1, {{5, 16}}));  // evicts 3
  CHECK(matches(h, exact_req("t", "m", "vllm", 2, 16), "r"));
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 3, 16), "r"));
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 50, {{6, 16}}));  // older than all: itself
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 6, 16), "r"));
  CHECK(h.shard->entry_count() == 3);
  CHECK(h.shard->eviction_counters().lru_cap == 3);
}

TEST_CASE("cap is global across shards sharing IndexGlobals") {
  IndexConfig cfg;
  cfg.max_entries = 6;
  IndexGlobals g;
  Harness a(cfg, &g);
  Harness b(cfg, &g);
  a.ingest(exact_update("ta", "m", "vllm", "r", kNow, {{1, 16}, {2, 16}, {3, 16}, {4, 16}}));
  b.ingest(exact_update("tb", "m", "vllm", "r", kNow, {{1, 16}, {2, 16}, {3, 16}, {4, 16}}));
  CHECK(g.total_entries.load() == 6);
  CHECK(a.shard->entry_count() == 4);
  CHECK(b.shard->entry_count() == 2);  // the shard whose ingest crossed the cap evicts its own
  a.shard->sweep_slice(kNow + 31 * kMin, 1000);
  CHECK(g.total_entries.load() == 2);
}

TEST_CASE("LFU: delivered PREFIX_MATCH credits every block of the run; downgrades credit nothing") {
  IndexConfig cfg;
  cfg.max_entries = 6;
  Harness h(cfg);
  h.policy(R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu"}]})");
  h.ingest(chain_update("t", "m", "vllm", "old", kNow - 10, {1, 2, 3, 4}));
  h.ingest(exact_update("t", "m", "vllm", "new", kNow - 5, {{100, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "other", kNow - 5, {{101, 16}}));
  // A delivered chain match on "old" (4 blocks, 64 tokens) credits its 4 entries.
  CHECK(h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})).reason_code() == reason::kPrefixMatch);
  // A downgraded lookup (below the 64-token floor) credits nothing: "new" stays at 0.
  auto r = h.lookup(exact_req("t", "m", "vllm", 100, 16));
  CHECK(r.reason_code() == reason::kAffinityHint);
  // Overflow by 2: victims are access_count 0 first ("new", "other" by key bytes 100 < 101),
  // although "old" has the oldest last_seen.
  h.ingest(exact_update("t", "m", "vllm", "x", kNow, {{200, 16}, {201, 16}}));
  CHECK(h.shard->entry_count() == 6);
  CHECK(h.shard->eviction_counters().lfu_cap == 2);
  CHECK(matches(h, chain_req("t", "m", "vllm", {1, 2, 3, 4}), "old"));
  CHECK_FALSE(matches(h, exact_req("t", "m", "vllm", 100, 16), "new"));
  // The same under LRU evicts the oldest: "old"'s blocks.
  Harness l(cfg);
  l.ingest(chain_update("t", "m", "vllm", "old", kNow - 10, {1, 2, 3, 4}));
  l.ingest(exact_update("t", "m", "vllm", "new", kNow - 5, {{100, 16}}));
  l.ingest(exact_update("t", "m", "vllm", "other", kNow - 5, {{101, 16}}));
  l.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4}));
  l.ingest(exact_update("t", "m", "vllm", "x", kNow, {{200, 16}, {201, 16}}));
  CHECK(l.shard->eviction_counters().lru_cap == 2);
  CHECK(l.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})).reason_code() != reason::kPrefixMatch);
  // A TIMEOUT'd lookup credits nothing either.
  Harness tmo(cfg);
  tmo.policy(
      R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu","lookupTimeoutMs":1}]})");
  tmo.ingest(chain_update("t", "m", "vllm", "old", kNow - 10, {1, 2, 3, 4}));
  tmo.ingest(exact_update("t", "m", "vllm", "new", kNow - 5, {{100, 16}, {101, 16}}));
  tmo.clock.mono_step_us = 600;  // the post-index deadline check sees +1.2 ms
  CHECK(tmo.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})).reason_code() == reason::kTimeout);
  tmo.clock.mono_step_us = 0;
  tmo.ingest(exact_update("t", "m", "vllm", "x", kNow, {{200, 16}, {201, 16}}));
  CHECK(tmo.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})).reason_code() !=
        reason::kPrefixMatch);
}

TEST_CASE("tenant quota: whole keys, oldest newest-last_seen first, other tenants untouched") {
  Harness h;
  h.policy(
      R"({"version":7,"tenants":[{"tenantID":"q","maxIndexEntries":3},{"tenantID":"z","maxIndexEntries":0}]})");
  h.ingest(
      exact_update("other", "m", "vllm", "r", kNow - 100, {{1, 16}, {2, 16}, {3, 16}, {4, 16}}));
  for (int i = 0; i < 6; ++i) {
    h.ingest(exact_update("q", "m", "vllm", "r1", kNow - 50 + i,
                          {{static_cast<std::uint64_t>(10 + i), 16}}));
    // key 10 is also held by r2 later, making its newest last_seen recent.
    if (i == 0) h.ingest(exact_update("q", "m", "vllm", "r2", kNow, {{10, 16}}));
  }
  pb::GetCacheStateResponse out = h.cache_state("q", "m");
  CHECK(out.summary().total_prefixes() == 3);
  h.policy(
      R"({"version":7,"policies":[{"namespace":"q","minimumMatchedTokens":0,"routingFloorScore":0}],"tenants":[{"tenantID":"q","maxIndexEntries":3},{"tenantID":"z","maxIndexEntries":0}]})");
  CHECK(matches(h, exact_req("q", "m", "vllm", 10, 16), "r2"));
  CHECK(matches(h, exact_req("q", "m", "vllm", 10, 16), "r1"));  // whole key kept
  CHECK(matches(h, exact_req("q", "m", "vllm", 15, 16), "r1"));
  CHECK(matches(h, exact_req("q", "m", "vllm", 14, 16), "r1"));
  CHECK_FALSE(matches(h, exact_req("q", "m", "vllm", 13, 16), "r1"));
  std::uint64_t q_evicted = 0;
  h.shard->for_each_tenant_eviction([&](std::string_view t, std::uint64_t n) {
    if (t == "q") q_evicted = n;
  });
  CHECK(q_evicted == 3);  // 11, 12, 13 (key 10 is kept alive by r2)
  out = h.cache_state("other", "m");
  CHECK(out.summary().total_prefixes() == 4);
  // Budget 0 admits nothing.
  h.ingest(exact_update("z", "m", "vllm", "r", kNow, {{1, 16}, {2, 16}}));
  out = h.cache_state("z", "m");
  CHECK(out.summary().total_prefixes() == 0);
  CHECK(h.shard->entry_count() == 4 + 4);  // other: 4; q: keys 10 (×2), 14, 15
}

TEST_CASE("snapshot rows and operator aggregates") {
  Harness h;
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow - 10, {{1, 16}, {2, 16}}));
  h.ingest(exact_update("t", "m2", "vllm", "r1", kNow - 5, {{1, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r2", kNow - 7, {{1, 16}}));
  pb::CacheStateUpdate s;
  s.set_tenant_id("t");
  s.set_model_id("m");
  s.set_replica_id("r3");  // stats only
  s.set_timestamp_us(kNow - 3);
  s.mutable_stats()->set_hit_rate(0.5f);
  s.mutable_stats()->set_cache_memory_bytes(100);
  h.ingest(s);
  s.set_replica_id("r1");
  s.mutable_stats()->set_hit_rate(0.25f);
  s.mutable_stats()->set_cache_memory_bytes(50);
  s.mutable_stats()->set_t2_hit_tokens(7);
  h.ingest(s);
  h.ingest(exact_update("u", "m", "vllm", "r1", kNow, {{1, 16}}));
  auto snap = h.shard->collect_snapshot();
  std::sort(snap.replicas.begin(), snap.replicas.end(), [](const auto& a, const auto& b) {
    return std::tie(a.tenant, a.replica_id) < std::tie(b.tenant, b.replica_id);
  });
  std::sort(snap.tenants.begin(), snap.tenants.end(),
            [](const auto& a, const auto& b) { return a.tenant_id < b.tenant_id; });
  REQUIRE(snap.replicas.size() == 4);
  const ReplicaRow& t1 = snap.replicas[0];
  CHECK(t1.tenant == "t");
  CHECK(t1.replica_id == "r1");
  CHECK(t1.prefix_count == 3);
  CHECK(t1.last_event_at_us == kNow - 5);
  CHECK(t1.stats_reported);
  CHECK(t1.last_update_us == kNow - 3);
  CHECK(t1.hit_rate == 0.25);
  CHECK(t1.cache_memory_bytes == 50);
  CHECK(t1.t2_hit_tokens == 7);
  CHECK(snap.replicas[1].replica_id == "r2");
  CHECK(snap.replicas[1].prefix_count == 1);
  CHECK_FALSE(snap.replicas[1].stats_reported);
  CHECK(snap.replicas[1].last_update_us == 0);
  CHECK(snap.replicas[2].replica_id == "r3");
  CHECK(snap.replicas[2].prefix_count == 0);
  CHECK(snap.replicas[2].last_event_at_us == 0);
  CHECK(snap.replicas[3].tenant == "u");
  REQUIRE(snap.tenants.size() == 2);
  CHECK(snap.tenants[0].tenant_id == "t");
  CHECK(snap.tenants[0].index_entries == 3);
  CHECK(snap.tenants[0].hit_rate == doctest::Approx(0.375));
  CHECK(snap.tenants[0].hit_rate_reported);
  CHECK(snap.tenants[0].memory_used == 150);
  CHECK(snap.tenants[1].index_entries == 1);
  CHECK_FALSE(snap.tenants[1].hit_rate_reported);
  CHECK(snap.total_prefixes == 4);
  CHECK(snap.hot_prefixes == 0);

  std::map<std::string, std::int64_t> models;
  h.shard->for_each_model_keys(
      [&](std::string_view m, std::int64_t n) { models[std::string(m)] += n; });
  CHECK(models == std::map<std::string, std::int64_t>{{"m", 3}, {"m2", 1}});
  // Drain m2: reported as 0 once, then forgotten.
  h.event(pb::CacheEvent::ALL_CLEARED, "t", "m2", "r1");
  models.clear();
  h.shard->for_each_model_keys(
      [&](std::string_view m, std::int64_t n) { models[std::string(m)] += n; });
  CHECK(models == std::map<std::string, std::int64_t>{{"m", 3}, {"m2", 0}});
  models.clear();
  h.shard->for_each_model_keys(
      [&](std::string_view m, std::int64_t n) { models[std::string(m)] += n; });
  CHECK(models == std::map<std::string, std::int64_t>{{"m", 3}});
}

TEST_CASE("owner_core: seeded, stable, in range") {
  CHECK(owner_core("anything", 0) == 0);
  CHECK(owner_core("anything", 1) == 0);
  std::vector<int> per_core(4, 0);
  for (int i = 0; i < 4000; ++i) {
    const unsigned c = owner_core(named("tenant-", i), 4);
    REQUIRE(c < 4);
    ++per_core[c];
    CHECK(owner_core(named("tenant-", i), 4) == c);
  }
  for (int n : per_core) CHECK(n > 800);  // roughly uniform
  // Pinned values: the partition must not change across builds.
  CHECK(owner_core("team-a", 2) == owner_core("team-a", 2));
}

TEST_CASE("memory: interned names are released when their entries go") {
  Harness h;
  for (int i = 0; i < 100; ++i)
    h.ingest(exact_update(named("t", i), "m", "vllm", named("r", i), kNow, {{1, 16}}));
  CHECK(h.shard->entry_count() == 100);
  h.shard->sweep_slice(kNow + 31 * kMin, 1000);
  CHECK(h.shard->entry_count() == 0);
  CHECK(h.shard->key_count() == 0);
  CHECK(h.shard->collect_snapshot().replicas.empty());
  CHECK(h.shard->collect_snapshot().tenants.empty());
  // The index works again afterwards (ids reused).
  h.ingest(exact_update("t5", "m", "vllm", "rX", kNow + 31 * kMin, {{1, 16}}));
  h.clock.wall = kNow + 31 * kMin;
  h.policy(R"({"version":7,"policies":[{"namespace":"t5","minimumMatchedTokens":0}]})");
  check_scores(h.lookup(exact_req("t5", "m", "vllm", 1, 16)),
               {{"rX", 16, 16, 1, T::CACHE_TIER_T1}});
}

TEST_CASE("tenant quota under a stream of 4x the budget with refreshes and out-of-order reports") {
  Harness h;
  h.policy(
      R"({"version":7,"policies":[{"namespace":"q","minimumMatchedTokens":0,"routingFloorScore":0}],"tenants":[{"tenantID":"q","maxIndexEntries":50}]})");
  // Reference model: key → newest last_seen; survivors are the 50 largest
  // (newest, key bytes) after every ingest.
  std::map<std::uint64_t, std::int64_t> model;
  auto enforce = [&] {
    while (model.size() > 50) {
      auto victim = model.begin();
      for (auto it = model.begin(); it != model.end(); ++it) {
        if (std::pair(it->second, hb(it->first)) < std::pair(victim->second, hb(victim->first)))
          victim = it;
      }
      model.erase(victim);
    }
  };
  std::uint64_t evicted_expected = 0;
  for (int i = 0; i < 200; ++i) {
    const auto key = static_cast<std::uint64_t>(1000 + i);
    // Every 7th report is 10 min in the past; every 5th refreshes an older key.
    const std::int64_t ts = i % 7 == 3 ? kNow - 10 * kMin + i : kNow + i;
    h.ingest(exact_update("q", "m", "vllm", "r", ts, {{key, 16}}));
    model[key] = std::max(model.count(key) ? model[key] : INT64_MIN, ts);
    const std::size_t before = model.size();
    enforce();
    evicted_expected += before - model.size();
    if (i % 5 == 4) {
      const auto old = static_cast<std::uint64_t>(1000 + i - 3);
      if (model.count(old)) {
        h.ingest(exact_update("q", "m", "vllm", "r", kNow + 1000 + i, {{old, 16}}));
        model[old] = kNow + 1000 + i;
      }
    }
  }
  CHECK(h.shard->key_count() == 50);
  for (int i = 0; i < 200; ++i) {
    const auto key = static_cast<std::uint64_t>(1000 + i);
    CAPTURE(i);
    CHECK(matches(h, exact_req("q", "m", "vllm", key, 16), "r") == (model.count(key) == 1));
  }
  std::uint64_t evicted = 0;
  h.shard->for_each_tenant_eviction([&](std::string_view t, std::uint64_t n) {
    if (t == "q") evicted = n;
  });
  CHECK(evicted == evicted_expected);
  CHECK(evicted == 150);
}

TEST_CASE("cap victim order matches a brute-force reference under random LRU/LFU traffic") {
  IndexConfig cfg;
  cfg.max_entries = 30;
  Harness h(cfg);
  const char* lfu =
      R"({"version":7,"policies":[{"namespace":"t","eviction":"lfu","minimumMatchedTokens":0,"routingFloorScore":0}]})";
  const char* lru =
      R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0,"routingFloorScore":0}]})";
  bool on_lfu = false;
  h.policy(lru);
  struct Ref {
    std::int64_t last_seen;
    std::uint32_t access;
  };
  // (key, replica) → state; the order key is (a, last_seen, key bytes, replica).
  std::map<std::pair<std::uint64_t, std::string>, Ref> ref;
  auto evict_to_cap = [&] {
    while (ref.size() > 30) {
      auto victim = ref.begin();
      auto order = [&](const auto& it) {
        return std::tuple(on_lfu ? it->second.access : 0u, it->second.last_seen,
                          hb(it->first.first), it->first.second);
      };
      for (auto it = ref.begin(); it != ref.end(); ++it)
        if (order(it) < order(victim)) victim = it;
      ref.erase(victim);
    }
  };
  std::uint64_t rng = 12345;
  auto next = [&](std::uint64_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (rng >> 33) % n;
  };
  const std::string replicas[] = {"a", "b", "c"};
  for (int step = 0; step < 2000; ++step) {
    const std::uint64_t op = next(100);
    if (op < 60) {  // ingest 1..4 keys from one replica, timestamps with ties
      const std::string& r = replicas[next(3)];
      const std::int64_t ts = kNow - static_cast<std::int64_t>(next(40)) * 1000;
      std::vector<std::pair<std::uint64_t, std::int32_t>> keys;
      const std::uint64_t n = 1 + next(4);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t k = next(60);
        bool dup = false;
        for (auto& [kk, _] : keys) dup = dup || kk == k;
        if (!dup) keys.push_back({k, 16});
      }
      h.ingest(exact_update("t", "m", "vllm", r, ts, keys));
      for (auto& [k, _] : keys) {
        auto [it, fresh] = ref.try_emplace({k, r}, Ref{ts, 0});
        if (!fresh) it->second.last_seen = ts;
      }
      evict_to_cap();
    } else if (op < 85) {  // exact lookup: LFU credit for every holder
      const std::uint64_t k = next(60);
      auto resp = h.lookup(exact_req("t", "m", "vllm", k, 16));
      int holders = 0;
      for (auto& [key, st] : ref) {
        if (key.first != k) continue;
        ++holders;
        if (on_lfu) ++st.access;
      }
      if (holders == 0) {
        CHECK(resp.reason_code() != reason::kPrefixMatch);
      } else {
        CHECK(resp.reason_code() == reason::kPrefixMatch);
        CHECK(resp.replica_scores_size() == holders);
      }
    } else if (op < 95) {  // PREFIX_EVICTED
      const std::uint64_t k = next(60);
      const std::string& r = replicas[next(3)];
      h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", r, hb(k));
      ref.erase({k, r});
    } else {  // switch LRU <-> LFU (access counts are kept)
      on_lfu = !on_lfu;
      h.policy(on_lfu ? lfu : lru);
    }
    REQUIRE(h.shard->entry_count() == static_cast<std::int64_t>(ref.size()));
    // Per-replica entry counts (no LFU side effect, unlike a lookup).
    std::map<std::string, std::int64_t> want, got;
    for (auto& [key, st] : ref) ++want[key.second];
    for (const auto& row : h.shard->collect_snapshot().replicas)
      if (row.prefix_count > 0) got[row.replica_id] = row.prefix_count;
    REQUIRE(got == want);
  }
  // Every reference entry is in the index.
  for (auto& [key, st] : ref) {
    CAPTURE(key.first);
    CHECK(matches(h, exact_req("t", "m", "vllm", key.first, 16), key.second));
  }
  const auto& ev = h.shard->eviction_counters();
  CHECK(ev.lru_cap + ev.lfu_cap > 100);
}
