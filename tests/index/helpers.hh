#pragma once
// Builders and assertions shared by the index unit tests.

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "config/policy.hh"
#include "index/shard.hh"
#include "sharding/index_wire.hh"
#include "support/builders.hh"

namespace ic::index::test {

namespace pb = ::inferencecache::v1alpha1;

inline constexpr std::int64_t kMin = 60'000'000;             // one minute in µs
inline constexpr std::int64_t kNow = 1'700'000'000'000'000;  // wall µs of the tests

// 8-byte big-endian block hash of v (the fingerprint wire form).
inline std::string hb(std::uint64_t v) { return ic::test::block_hash(v); }

using ic::test::chain_update;
using ic::test::scoped_lookup;
using ic::test::scoped_update;

// One update carrying legacy exact prefixes (hash, token_count).
inline pb::CacheStateUpdate exact_update(const std::string& tenant, const std::string& model,
                                         const std::string& scheme, const std::string& replica,
                                         std::int64_t ts,
                                         std::vector<std::pair<std::uint64_t, std::int32_t>> keys,
                                         int tier = 0, const std::string& adapter = "") {
  pb::CacheStateUpdate u = scoped_update(tenant, model, scheme, replica, ts);
  for (auto [h, n] : keys) {
    auto* p = u.add_prefixes();
    p->set_prefix_hash(hb(h));
    p->set_token_count(n);
    p->set_tier(static_cast<pb::CacheTier>(tier));
    p->set_adapter_id(adapter);
  }
  return u;
}

inline pb::LookupRouteRequest chain_req(const std::string& tenant, const std::string& model,
                                        const std::string& scheme,
                                        std::vector<std::uint64_t> blocks,
                                        std::int32_t per_block = 16) {
  pb::LookupRouteRequest r = scoped_lookup(tenant, model, scheme);
  for (std::uint64_t b : blocks) {
    r.add_block_hashes(hb(b));
    r.add_block_token_counts(per_block);
  }
  return r;
}

inline pb::LookupRouteRequest exact_req(const std::string& tenant, const std::string& model,
                                        const std::string& scheme, std::uint64_t hash,
                                        std::int32_t tokens) {
  pb::LookupRouteRequest r = scoped_lookup(tenant, model, scheme);
  r.set_prefix_hash(hb(hash));
  r.set_prefix_token_count(tokens);
  return r;
}

inline std::shared_ptr<const config::PolicySet> policies(const std::string& json) {
  auto r = config::parse_policy_json(json);
  INFO(r.error);
  REQUIRE(r.ok());
  return r.set;
}

// A shard with a manual clock at kNow. The reference ranking of docs/lookup.md
// unless `ranking` says otherwise (what `--ranking reference` does on the
// server): the exact scores of these tests are the reference ranking's.
struct Harness {
  ManualClock clock;
  std::unique_ptr<Shard> shard;
  explicit Harness(IndexConfig cfg = {}, IndexGlobals* globals = nullptr,
                   config::Ranking ranking = config::Ranking::kReference) {
    clock.wall = kNow;
    clock.mono = 5'000'000;
    cfg.ranking = ranking;
    shard = std::make_unique<Shard>(cfg, globals);
  }
  void policy(const std::string& json) { shard->set_policies(policies(json)); }
  // GetCacheState for (tenant, model), through the service's translation.
  pb::GetCacheStateResponse cache_state(const std::string& tenant, const std::string& model) {
    pb::GetCacheStateRequest g;
    g.set_tenant_id(tenant);
    g.set_model_id(model);
    pb::GetCacheStateResponse out;
    ic::sharding::wire::get_cache_state(*shard, g, &out);
    return out;
  }
  IngestResult ingest(const pb::CacheStateUpdate& u) {
    return ic::sharding::wire::ingest(*shard, u, clock.wall);
  }
  pb::LookupRouteResponse lookup(const pb::LookupRouteRequest& r,
                                 std::int64_t deadline = INT64_MAX) {
    LookupContext ctx;
    ctx.clock = &clock;
    ctx.deadline_mono_us = deadline;
    pb::LookupRouteResponse out;
    ic::sharding::wire::lookup_route(*shard, r, ctx, &out);
    return out;
  }
  std::size_t event(pb::CacheEvent::Type type, const std::string& tenant, const std::string& model,
                    const std::string& replica, const std::string& hash = "",
                    const std::string& adapter = "", std::int64_t ts = 0) {
    pb::CacheEvent ev;
    ev.set_type(type);
    ev.set_tenant_id(tenant);
    ev.set_model_id(model);
    ev.set_replica_id(replica);
    ev.set_prefix_hash(hash);
    ev.set_adapter_id(adapter);
    ev.set_timestamp_us(ts);
    return ic::sharding::wire::apply_event(*shard, ev, clock.wall);
  }
};

// Expected ReplicaScore.
struct Want {
  std::string replica;
  double score;
  std::int32_t matched;
  double prob;
  pb::CacheTier tier;
};

inline void check_scores(const pb::LookupRouteResponse& r, const std::vector<Want>& want) {
  CAPTURE(r.ShortDebugString());
  REQUIRE(static_cast<std::size_t>(r.replica_scores_size()) == want.size());
  int i = 0;
  for (const Want& w : want) {
    const auto& s = r.replica_scores(i++);
    CAPTURE(i);
    CHECK(s.replica_id() == w.replica);
    CHECK(s.score() == doctest::Approx(w.score).epsilon(1e-6));
    CHECK(s.matched_tokens() == w.matched);
    CHECK(s.estimated_cache_hit_prob() == doctest::Approx(w.prob).epsilon(1e-6));
    CHECK(s.tier() == w.tier);
  }
}

}  // namespace ic::index::test
