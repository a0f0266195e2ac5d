// The global cap across shards (docs/hostile-peers.md "Global cap") and the
// exact /snapshot lastEventAt, against reference models.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <utility>

#include "helpers.hh"
#include "index/partition.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {

bool matches(Harness& h, const std::string& tenant, std::uint64_t key) {
  // 128 tokens: over the default matched-tokens floor (64).
  const auto resp = h.lookup(exact_req(tenant, "m", "vllm", key, 128));
  return resp.reason_code() == reason::kPrefixMatch;
}

// Two shards on one IndexGlobals, delivering every cap hand-off at once (what
// the service's cross-core post does, without the delay).
struct TwoShards {
  explicit TwoShards(IndexConfig cfg) : a(cfg, &g), b(cfg, &g) {}
  Harness& owner(const std::string& tenant) { return owner_core(tenant, 2) == 0 ? a : b; }
  Harness& by_slot(int slot) { return slot == a.shard->cap_slot() ? a : b; }
  IngestResult ingest(const std::string& tenant, std::uint64_t key, std::int64_t ts,
                      bool deliver = true) {
    const IngestResult r =
        owner(tenant).ingest(exact_update(tenant, "m", "vllm", "r", ts, {{key, 128}}));
    for (int slot = r.cap_handoff, hops = 0; deliver && slot >= 0 && hops < 2; ++hops) {
      slot = by_slot(slot).shard->pay_cap_debt().handoff;
    }
    return r;
  }
  std::int64_t entries() const { return a.shard->entry_count() + b.shard->entry_count(); }
  IndexGlobals g;
  Harness a, b;
};

// The first tenant names "tenant-<i>" that core 0 and core 1 of two own.
std::pair<std::string, std::string> tenants_on_each_core() {
  std::string a_tenant, b_tenant;
  for (int i = 0; a_tenant.empty() || b_tenant.empty(); ++i) {
    const std::string t = "tenant-" + std::to_string(i);
    (owner_core(t, 2) == 0 ? a_tenant : b_tenant) = t;
  }
  return {a_tenant, b_tenant};
}

// A single global LRU over (tenant, key): the reference order.
struct ReferenceLru {
  explicit ReferenceLru(std::size_t cap) : cap(cap) {}
  void ingest(const std::string& tenant, std::uint64_t key, std::int64_t ts) {
    seen[{tenant, key}] = ts;
    while (seen.size() > cap) {
      auto oldest = std::min_element(seen.begin(), seen.end(), [](const auto& x, const auto& y) {
        return x.second < y.second;
      });
      seen.erase(oldest);
    }
  }
  std::size_t cap;
  std::map<std::pair<std::string, std::uint64_t>, std::int64_t> seen;
};

}  // namespace

TEST_CASE("global cap, two shards: 1,000 random ingests over 8 tenants evict like one global LRU") {
  IndexConfig cfg;
  cfg.max_entries = 100;
  cfg.cap_slack_us = 0;  // distinct timestamps: the order must be exact
  TwoShards s(cfg);
  ReferenceLru ref(100);
  std::mt19937_64 rng(12);
  // 1,000 distinct timestamps over the last 1,000 s, in random order.
  std::vector<std::int64_t> ts(1000);
  for (int i = 0; i < 1000; ++i) ts[i] = kNow - 1'000'000LL * (i + 1);
  std::shuffle(ts.begin(), ts.end(), rng);
  int cross_core = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string tenant = "tenant-" + std::to_string(rng() % 8);
    const std::uint64_t key = rng() % 60;
    const IngestResult r = s.ingest(tenant, key, ts[i]);
    ref.ingest(tenant, key, ts[i]);
    if (r.cap_handoff >= 0) ++cross_core;
    REQUIRE(s.entries() == static_cast<std::int64_t>(ref.seen.size()));
    CHECK(s.g.cap_debt.load() == 0);
  }
  CHECK(cross_core > 50);  // both shards crossed the cap for the other's entries
  for (int t = 0; t < 8; ++t) {
    const std::string tenant = "tenant-" + std::to_string(t);
    for (std::uint64_t key = 0; key < 60; ++key) {
      INFO(tenant, " key ", key);
      CHECK(matches(s.owner(tenant), tenant, key) == (ref.seen.count({tenant, key}) == 1));
    }
  }
}

TEST_CASE("global cap: the newcomer on another shard survives, the oldest entry goes") {
  IndexConfig cfg;
  cfg.max_entries = 10;
  TwoShards s(cfg);
  const auto [a_tenant, b_tenant] = tenants_on_each_core();
  for (std::uint64_t k = 0; k < 10; ++k) s.ingest(a_tenant, k, kNow - kMin + static_cast<int>(k));
  const IngestResult r = s.ingest(b_tenant, 100, kNow);
  CHECK(r.cap_handoff == s.a.shard->cap_slot());
  CHECK(r.evicted_cap == 0);
  CHECK(s.entries() == 10);
  CHECK(matches(s.b, b_tenant, 100));
  CHECK_FALSE(matches(s.a, a_tenant, 0));  // the oldest of the whole index
  CHECK(matches(s.a, a_tenant, 1));
  CHECK(s.a.shard->eviction_counters().lru_cap == 1);
}

TEST_CASE("global cap: undelivered hand-offs never take the total past cap + slack") {
  IndexConfig cfg;
  cfg.max_entries = 100;
  cfg.cap_slack_entries = 8;
  TwoShards s(cfg);
  const auto [a_tenant, b_tenant] = tenants_on_each_core();
  for (std::uint64_t k = 0; k < 100; ++k) s.ingest(a_tenant, k, kNow - kMin);
  // b's fresh entries each hand off to a, which never runs.
  for (std::uint64_t k = 0; k < 50; ++k) {
    s.ingest(b_tenant, k, kNow, /*deliver=*/false);
    CHECK(s.entries() <= 108);
  }
  CHECK(s.entries() == 108);
  CHECK(s.g.cap_debt.load() == 8);
  CHECK(s.b.shard->eviction_counters().lru_cap == 42);  // its own, past the slack
  // The owed shard pays when it runs: back to the cap, oldest first.
  const CapPayment p = s.a.shard->pay_cap_debt();
  CHECK(p.evicted == 8);
  CHECK(p.handoff == -1);
  CHECK(s.entries() == 100);
  CHECK(s.g.cap_debt.load() == 0);
}

TEST_CASE("snapshot lastEventAt follows the newest entry that still exists") {
  Harness h;
  auto last_event_at = [&] {
    const ShardSnapshot snap = h.shard->collect_snapshot();
    REQUIRE(snap.replicas.size() == 1);
    return snap.replicas[0].last_event_at_us;
  };
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - kMin, {{1, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - kMin / 2, {{2, 16}, {3, 16}}));
  CHECK(last_event_at() == kNow - kMin / 2);
  h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r", hb(2));
  CHECK(last_event_at() == kNow - kMin / 2);  // key 3 is as new
  h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r", hb(3));
  CHECK(last_event_at() == kNow - kMin);
  // Re-reported with an older timestamp: the newest moves back.
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 2 * kMin, {{1, 16}}));
  CHECK(last_event_at() == kNow - 2 * kMin);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 3 * kMin, {{4, 16}}));
  CHECK(last_event_at() == kNow - 2 * kMin);
  // The TTL sweep takes the newest (key 1 at −2 min, TTL 30 min): key 4 is left.
  h.ingest(exact_update("t", "m", "vllm", "r", kNow - 20 * kMin, {{1, 16}}));
  h.shard->sweep_slice(kNow + 9 * kMin, 1000);
  CHECK(last_event_at() == kNow - 3 * kMin);
}
