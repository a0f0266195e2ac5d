// Read copies of a spread tenant (placement/spread.hh, docs/placement.md) on
// a two-core index run by hand: after the owner's changes went through the
// mailboxes, the copy answers every LookupRoute exactly as the owner does.

#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>

#include "config/policy.hh"
#include "index/partition.hh"
#include "placement/spread.hh"
#include "service_fixture.hh"
#include "sharding/index_wire.hh"
#include "two_core_index.hh"

namespace pb = ::inferencecache::v1alpha1;

namespace {

// a + b (appends: GCC 12's -Wrestrict misfires on operator+ chains here).
std::string cat(std::string a, const std::string& b) {
  a.append(b);
  return a;
}

// First tenant name "<stem>-N" owned by `core` of 2.
std::string tenant_on(unsigned core, const std::string& stem = "tenant") {
  for (int i = 0;; ++i) {
    std::string t = cat(cat(stem, "-"), std::to_string(i));
    if (ic::index::owner_core(t, 2) == core) return t;
  }
}

// A chain of `blocks` 16-token blocks "<seed>0", "<seed>1", ... of `replica`.
pb::CacheStateUpdate chain(const std::string& tenant, const std::string& replica,
                           const std::string& seed, int blocks, std::int64_t ts = 0) {
  pb::CacheStateUpdate u;
  u.set_tenant_id(tenant);
  u.set_model_id("m");
  u.set_replica_id(replica);
  u.set_hash_scheme("s");
  u.set_timestamp_us(ts);
  auto* p = u.add_prefixes();
  for (int b = 0; b < blocks; ++b) {
    p->add_block_hashes(cat(seed, std::to_string(b)));
    p->add_block_token_counts(16);
  }
  u.mutable_stats()->set_replica_id(replica);
  u.mutable_stats()->set_pressure(0.25f);
  u.mutable_stats()->set_hit_rate(0.5f);
  return u;
}

pb::LookupRouteRequest chain_lookup(const std::string& tenant, const std::string& seed,
                                    int blocks) {
  pb::LookupRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id("m");
  r.set_hash_scheme("s");
  for (int b = 0; b < blocks; ++b) {
    r.add_block_hashes(cat(seed, std::to_string(b)));
    r.add_block_token_counts(16);
  }
  return r;
}

pb::CacheEvent event(const std::string& tenant, pb::CacheEvent::Type type,
                     const std::string& replica, const std::string& hash = {}) {
  pb::CacheEvent e;
  e.set_tenant_id(tenant);
  e.set_model_id("m");
  e.set_replica_id(replica);
  e.set_type(type);
  e.set_prefix_hash(hash);
  return e;
}

std::shared_ptr<const ic::config::PolicySet> policies(const std::string& json) {
  auto parsed = ic::config::parse_policy_json(json);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  return parsed.set;
}

// The spread tenant is owned by core 1; its copy lives on core 0, where the
// calls of these tests arrive (the link's current core).
struct Spread : ic::test::TwoCoreIndex {
  explicit Spread(ic::index::IndexConfig config = {}, std::size_t max_queued = 65536,
                  std::size_t max_queued_bytes = std::size_t{64} << 20)
      : TwoCoreIndex(config),
        tenant(tenant_on(1)),
        placement(link, {&shard0, &shard1}, config, &globals, nullptr,
                  ic::placement::SpreadOptions{.tenants = {tenant},
                                               .cores_per_tenant = 0,
                                               .max_queued = max_queued,
                                               .max_queued_bytes = max_queued_bytes,
                                               .retry_us = 100}) {
    index.set_placement(&placement);
  }
  void ingest(const pb::CacheStateUpdate& u) {
    REQUIRE_FALSE(index.ingest(index.owner(u.tenant_id()), pb::CacheStateUpdate(u)).has_value());
    link.run();  // the owner applies; its forward reaches the copy
  }
  void publish(const pb::CacheEvent& e) {
    const bool refused =
        index.apply_event(index.owner(e.tenant_id()), pb::CacheEvent(e), [] {}).has_value();
    REQUIRE_FALSE(refused);
    link.run();
  }
  // The answer of `shard` (its serialized bytes; the manual clock makes the
  // latency field equal).
  std::string answer(ic::index::Shard& shard, const pb::LookupRouteRequest& r) {
    ic::index::LookupContext ctx;
    ctx.clock = &clock;
    pb::LookupRouteResponse response;
    ic::sharding::wire::lookup_route(shard, r, ctx, &response);
    return response.SerializeAsString();
  }
  pb::LookupRouteResponse parsed(const std::string& bytes) {
    pb::LookupRouteResponse r;
    REQUIRE(r.ParseFromString(bytes));
    return r;
  }
  ic::index::Shard& copy() { return *placement.copy_for(0, tenant); }
  // Owner and copy answer `r` byte for byte alike; returns the answer. Both
  // look up once, so their per-lookup side effects stay alike too.
  pb::LookupRouteResponse same(const pb::LookupRouteRequest& r) {
    REQUIRE(placement.copy_for(0, tenant) != nullptr);
    const std::string owner = answer(shard1, r);
    const std::string here = answer(copy(), r);
    CHECK(owner == here);
    return parsed(owner);
  }

  std::string tenant;
  ic::placement::SpreadPlacement placement;
};

}  // namespace

TEST_CASE_FIXTURE(Spread, "the tenant keeps its owner and gets a copy on the other core") {
  CHECK(index.owner(tenant) == 1);
  CHECK(placement.cores_of(tenant) == std::vector<unsigned>{1, 0});
  CHECK(placement.copy_for(0, tenant) != nullptr);
  CHECK(placement.copy_for(1, tenant) == nullptr);  // the owner answers from its own shard
  CHECK(placement.cores_of("other").empty());
}

TEST_CASE_FIXTURE(Spread, "ingest: the copy answers like the owner once forwarded") {
  ingest(chain(tenant, "r1", "a", 8));
  ingest(chain(tenant, "r2", "a", 4));
  CHECK(copy().entry_count() == 12);
  CHECK(shard1.entry_count() == 12);
  const pb::LookupRouteResponse r = same(chain_lookup(tenant, "a", 8));
  CHECK(r.reason_code() == "PREFIX_MATCH");
  REQUIRE(r.replica_scores_size() >= 1);
  CHECK(r.replica_scores(0).replica_id() == "r1");
  CHECK(r.replica_scores(0).matched_tokens() == 128);
  CHECK(placement.counters().forwarded.load() == 2);
  // Owner's entries and the copy's both count against the global cap.
  CHECK(globals.total_entries.load() == 24);
}

TEST_CASE_FIXTURE(Spread, "PREFIX_EVICTED and ALL_CLEARED reach the copy in order") {
  ingest(chain(tenant, "r1", "a", 8));
  ingest(chain(tenant, "r2", "a", 8));
  publish(event(tenant, pb::CacheEvent::PREFIX_EVICTED, "r1", "a7"));
  CHECK(copy().entry_count() == 15);
  CHECK(shard1.entry_count() == 15);
  pb::LookupRouteResponse r = same(chain_lookup(tenant, "a", 8));
  REQUIRE(r.replica_scores_size() >= 1);
  CHECK(r.replica_scores(0).replica_id() == "r2");
  CHECK(r.replica_scores(0).matched_tokens() == 128);
  publish(event(tenant, pb::CacheEvent::ALL_CLEARED, "r2"));
  CHECK(copy().entry_count() == 7);
  CHECK(shard1.entry_count() == 7);
  r = same(chain_lookup(tenant, "a", 8));
  REQUIRE(r.replica_scores_size() == 1);
  CHECK(r.replica_scores(0).replica_id() == "r1");
  CHECK(r.replica_scores(0).matched_tokens() == 112);
}

TEST_CASE_FIXTURE(Spread, "TTL expiry: the owner's sweep removes the copy's entries too") {
  const std::int64_t t0 = clock.wall;
  ingest(chain(tenant, "r1", "a", 4, t0 - 40LL * 60 * 1'000'000));  // older than the 30 min TTL
  ingest(chain(tenant, "r2", "b", 5, t0));
  CHECK(copy().entry_count() == 9);
  link.current = 1;  // the sweep runs on the owner's core
  while (!shard1.sweep_slice(clock.wall, 1024)) {
  }
  link.current = 0;
  link.run();
  CHECK(shard1.entry_count() == 5);
  CHECK(copy().entry_count() == 5);  // the copy never swept: the owner's removals came
  CHECK(same(chain_lookup(tenant, "a", 4)).reason_code() != "PREFIX_MATCH");
  CHECK(same(chain_lookup(tenant, "b", 5)).reason_code() == "PREFIX_MATCH");
}

TEST_CASE("cap eviction: the owner's victims leave the copy; copies count against the cap") {
  ic::index::IndexConfig config;
  config.max_entries = 20;
  config.cap_slack_entries = 1;
  Spread s(config);
  const std::int64_t t0 = s.clock.wall;
  for (int i = 0; i < 6; ++i)
    s.ingest(chain(s.tenant, cat("r", std::to_string(i)), "a", 4, t0 + i));
  // 24 entries reported; the owner keeps what fits beside its copy.
  CHECK(s.shard1.entry_count() == s.copy().entry_count());
  CHECK(s.shard1.entry_count() + s.copy().entry_count() <= 21);
  CHECK(s.globals.total_entries.load() == s.shard1.entry_count() + s.copy().entry_count());
  CHECK(s.shard1.entry_count() == 8);  // 8 + 8 copied ≤ 20: the two newest replicas
  const pb::LookupRouteResponse r = s.same(chain_lookup(s.tenant, "a", 4));
  REQUIRE(r.replica_scores_size() == 2);
  std::set<std::string> replicas{r.replica_scores(0).replica_id(),
                                 r.replica_scores(1).replica_id()};
  CHECK(replicas == std::set<std::string>{"r4", "r5"});
}

TEST_CASE_FIXTURE(Spread, "policy push: quota evictions and lookup policy reach the copy") {
  std::string json = R"({"version":7,"policies":[{"namespace":")";
  json.append(tenant);
  json.append(R"(","minimumMatchedTokens":48}],"tenants":[{"tenantID":")");
  json.append(tenant);
  json.append(R"(","maxIndexEntries":3}]})");
  const auto set = policies(json);
  link.current = 1;
  index.set_policies(1, set);
  link.current = 0;
  index.set_policies(0, set);
  CHECK(copy().policies()->quota_for(tenant) == nullptr);  // the copy decides no quota
  CHECK(copy().policies()->policy_for(tenant).minimum_matched_tokens == 48);
  const std::int64_t t0 = clock.wall;
  ingest(chain(tenant, "r1", "a", 2, t0 - 10));
  ingest(chain(tenant, "r1", "b", 3, t0));
  CHECK(shard1.key_count() == 3);  // the quota evicted a's keys on the owner...
  CHECK(copy().key_count() == 3);  // ...and on the copy, by the owner's removals
  // 48 tokens: at the policy's floor (the default 64 would refuse them).
  const pb::LookupRouteResponse b = same(chain_lookup(tenant, "b", 3));
  CHECK(b.reason_code() == "PREFIX_MATCH");
  REQUIRE(b.replica_scores_size() == 1);
  CHECK(b.replica_scores(0).matched_tokens() == 48);
  CHECK(same(chain_lookup(tenant, "a", 2)).reason_code() != "PREFIX_MATCH");
}

TEST_CASE_FIXTURE(Spread, "a tenant that is not spread is unchanged: owner only") {
  const std::string other = tenant_on(1, "plain");
  ingest(chain(other, "r1", "a", 4));
  CHECK(placement.copy_for(0, other) == nullptr);
  CHECK(shard1.entry_count() == 4);
  CHECK(shard0.entry_count() == 0);
  CHECK(placement.counters().forwarded.load() == 0);
  CHECK(globals.total_entries.load() == 4);
}

TEST_CASE_FIXTURE(Spread, "a full mailbox: forwards wait in order and are retried") {
  ingest(chain(tenant, "r1", "a", 4));
  link.capacity[0] = 0;
  ingest(chain(tenant, "r2", "a", 4));
  publish(event(tenant, pb::CacheEvent::ALL_CLEARED, "r1"));
  CHECK(placement.counters().mailbox_full.load() >= 1);
  CHECK(copy().entry_count() == 4);  // stale: r2 not there yet, r1 not cleared yet
  link.capacity[0] = 1u << 20;
  link.advance(100);  // the retry timer
  link.run();
  CHECK(copy().entry_count() == 4);
  CHECK(shard1.entry_count() == 4);
  const pb::LookupRouteResponse r = same(chain_lookup(tenant, "a", 4));
  REQUIRE(r.replica_scores_size() >= 1);
  CHECK(r.replica_scores(0).replica_id() == "r2");
  CHECK(placement.counters().resyncs.load() == 0);
}

TEST_CASE("a queue past its bound resyncs the copy; the owner answers meanwhile") {
  Spread s({}, /*max_queued=*/2);
  s.ingest(chain(s.tenant, "r1", "a", 4));
  s.link.capacity[0] = 0;
  s.ingest(chain(s.tenant, "r2", "b", 4));
  s.ingest(chain(s.tenant, "r3", "c", 4));
  s.ingest(chain(s.tenant, "r4", "d", 4));
  CHECK(s.placement.counters().resyncs.load() == 1);
  CHECK(s.placement.copy_for(0, s.tenant) == nullptr);  // lookups here go to the owner
  s.link.capacity[0] = 1u << 20;
  s.link.advance(100);
  s.link.run();
  REQUIRE(s.placement.copy_for(0, s.tenant) != nullptr);
  CHECK(s.copy().entry_count() == 16);
  for (const char* seed : {"a", "b", "c", "d"}) {
    CHECK(s.same(chain_lookup(s.tenant, seed, 4)).reason_code() == "PREFIX_MATCH");
  }
  CHECK(s.globals.total_entries.load() == 32);  // the dropped copy left the count
}

TEST_CASE("seed_copies loads the owners' state (after a state file load)") {
  ic::test::TwoCoreIndex two;
  const std::string tenant = tenant_on(1);
  two.link.current = 1;
  two.index.apply_ingest(1, chain(tenant, "r1", "a", 4), two.clock.wall);
  two.link.current = 0;
  ic::placement::SpreadPlacement placement(two.link, {&two.shard0, &two.shard1}, {}, &two.globals,
                                           nullptr, {.tenants = {tenant}});
  CHECK(placement.copy(0, tenant)->entry_count() == 0);
  placement.seed_copies();
  CHECK(placement.copy(0, tenant)->entry_count() == 4);
  CHECK(two.globals.total_entries.load() == 8);
}

TEST_CASE_FIXTURE(Spread, "LookupRoute on the copy's core answers there: no cross-core post") {
  ic::service::GrpcServiceOptions options;
  options.index = &index;
  ic::test::ServiceFixture svc(options);
  const std::string path = "/inferencecache.v1alpha1.InferenceCache/LookupRoute";
  ingest(chain(tenant, "r1", "a", 8));
  const int posts = link.posts;
  const auto id = svc.call(path, chain_lookup(tenant, "a", 8));
  CHECK(link.posts == posts);  // answered by core 0's copy
  const auto r = svc.single<pb::LookupRouteResponse>(id);
  CHECK(r.reason_code() == "PREFIX_MATCH");
  REQUIRE(r.replica_scores_size() == 1);
  CHECK(r.replica_scores(0).matched_tokens() == 128);
  // A tenant that is not spread still goes to its owner (core 1).
  const auto other = svc.call(path, chain_lookup(tenant_on(1, "plain"), "a", 8));
  CHECK(link.posts == posts + 1);
  link.run();
  svc.run();
  CHECK(svc.single<pb::LookupRouteResponse>(other).reason_code() != "PREFIX_MATCH");
}

TEST_CASE_FIXTURE(Spread, "changes applied off the owner's reactor are left to seed_copies") {
  // As a state file load before the reactors start: no core is current.
  link.current = 0;
  index.apply_ingest(1, chain(tenant, "r1", "a", 4), clock.wall);
  CHECK(link.queued(0) + link.queued(1) == 0);
  CHECK(placement.counters().forwarded.load() == 0);
  CHECK(copy().entry_count() == 0);
  placement.seed_copies();
  CHECK(copy().entry_count() == 4);
  CHECK(same(chain_lookup(tenant, "a", 4)).reason_code() == "PREFIX_MATCH");
}

TEST_CASE("a queue past its byte bound resyncs the copy too") {
  Spread s({}, /*max_queued=*/65536, /*max_queued_bytes=*/1024);
  s.link.capacity[0] = 0;
  s.ingest(chain(s.tenant, "r1", "a", 8));  // ≈ 0.2 KB queued: under the bound
  CHECK(s.placement.counters().resyncs.load() == 0);
  for (int i = 0; i < 8; ++i) s.ingest(chain(s.tenant, cat("r", std::to_string(i)), "b", 8));
  CHECK(s.placement.counters().resyncs.load() >= 1);
  CHECK(s.placement.copy_for(0, s.tenant) == nullptr);
  s.link.capacity[0] = 1u << 20;
  s.link.advance(100);
  s.link.run();
  REQUIRE(s.placement.copy_for(0, s.tenant) != nullptr);
  CHECK(s.copy().entry_count() == s.shard1.entry_count());
  CHECK(s.same(chain_lookup(s.tenant, "b", 8)).reason_code() == "PREFIX_MATCH");
}
