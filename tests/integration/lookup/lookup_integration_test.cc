// LookupRoute through the real inferencecache-server with grpc++ (a client
// nobody here wrote): reason codes of docs/lookup.md end to end, and tenants
// spread over all cores answered correctly whichever core a call arrives on.
// Freshness-sensitive cases use producer timestamps (timestamp_us) in the
// future (fresh = 1 exactly) or in the past (TTL), never sleeps; a value that
// decays with age is checked within the bounds the test's own clock readings
// around the call give (check_decayed).
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/affinity.hh"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
using ic::itest::deadline_in;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kMin = 60'000'000;

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

using ic::test::block_hash;

pb::CacheStateUpdate chain_update(const std::string& tenant, const std::string& replica,
                                  std::int64_t ts, const std::vector<std::uint64_t>& blocks,
                                  const std::string& scheme = "vllm") {
  return ic::test::chain_update(tenant, "m", scheme, replica, ts, blocks);
}

pb::LookupRouteRequest chain_req(const std::string& tenant, std::vector<std::uint64_t> blocks,
                                 const std::string& scheme = "vllm",
                                 const std::string& model = "m") {
  pb::LookupRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id(model);
  r.set_hash_scheme(scheme);
  for (std::uint64_t b : blocks) {
    r.add_block_hashes(block_hash(b));
    r.add_block_token_counts(16);
  }
  return r;
}

struct Served {
  std::string policy_path;
  ic::itest::ServerProcess server;
  std::shared_ptr<grpc::Channel> channel = ic::itest::insecure_channel(server.grpc_port());
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);

  // `reference`: pin the server to the reference ranking (--ranking reference).
  Served(std::string policy, std::vector<std::string> extra, bool reference = true)
      : policy_path(std::move(policy)), server(options(policy_path, std::move(extra), reference)) {}
  ~Served() { std::remove(policy_path.c_str()); }

  static ic::itest::ServerOptions options(const std::string& policy, std::vector<std::string> extra,
                                          bool reference) {
    ic::itest::ServerOptions o;
    o.extra_args = std::move(extra);
    o.extra_args.insert(o.extra_args.end(), {"--policy-file", policy});
    // The expectations of the existing cases are the reference ranking's (docs/ranking.md).
    if (reference) o.extra_args.insert(o.extra_args.end(), {"--ranking", "reference"});
    return o;
  }

  void report(pb::InferenceCache::Stub& s, const std::vector<pb::CacheStateUpdate>& updates) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::Ack ack;
    auto writer = s.ReportCacheState(&ctx, &ack);
    for (const auto& u : updates) REQUIRE(writer->Write(u));
    REQUIRE(writer->WritesDone());
    const grpc::Status st = writer->Finish();
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    CHECK(ack.accepted());
  }
  void report(const std::vector<pb::CacheStateUpdate>& updates) { report(*stub, updates); }

  pb::LookupRouteResponse lookup(pb::InferenceCache::Stub& s, const pb::LookupRouteRequest& r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::LookupRouteResponse out;
    const grpc::Status st = s.LookupRoute(&ctx, r, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }
  pb::LookupRouteResponse lookup(const pb::LookupRouteRequest& r) { return lookup(*stub, r); }
};

std::string write_policy(const std::string& json) {
  return ic::test::write_temp_file("ic-lookup-policy", json);
}

// LookupRoute of the exact 128-token prefix hash 100 in (t, m, vllm).
pb::LookupRouteRequest exact_100() {
  pb::LookupRouteRequest q = ic::test::scoped_lookup("t", "m", "vllm");
  q.set_prefix_hash(block_hash(100));
  q.set_prefix_token_count(128);
  return q;
}

void check_score(const pb::ReplicaScore& s, const std::string& id, double score, int matched,
                 double prob, pb::CacheTier tier) {
  constexpr double eps = 1e-6;
  CHECK(s.replica_id() == id);
  CHECK(s.score() == doctest::Approx(score).epsilon(eps));
  CHECK(s.matched_tokens() == matched);
  CHECK(s.estimated_cache_hit_prob() == doctest::Approx(prob).epsilon(eps));
  CHECK(s.tier() == tier);
}

// A value that decays linearly with the age the server computes from its own
// clock: `at_start` if the server read the clock at `start_us`, `per_s` lower
// for every second after. The server answered between start_us and end_us
// (the test's readings of the same clock), so the value lies in
// [at_start − per_s × (end_us − start_us) s, at_start] however loaded the
// machine was.
void check_decayed(double value, double at_start, double per_s, std::int64_t start_us,
                   std::int64_t end_us) {
  const double elapsed_s = static_cast<double>(end_us - start_us) / 1e6;
  CHECK(value <= at_start + 1e-9);
  CHECK(value >= at_start - per_s * elapsed_s - 1e-9);
}

}  // namespace

TEST_CASE("reason codes through the running server") {
  Served s(write_policy(R"({"version":7,"policies":[
      {"namespace":"t-chain","strategy":{"requireChain":true}},
      {"namespace":"t-ttl","minimumMatchedTokens":0,"routingFloorScore":0}]})"),
           {"--threads", "2", "--sweep-interval", "1h"});
  // Cold start: a globally empty index answers NO_HINT, not UNKNOWN_TENANT.
  CHECK(s.lookup(chain_req("t", {1, 2, 3, 4})).reason_code() == "NO_HINT");

  const std::int64_t future = wall_us() + 60 * kMin;  // age ≤ 0 → fresh exactly 1
  const std::int64_t now = wall_us();
  pb::CacheStateUpdate exact;
  exact.set_tenant_id("t");
  exact.set_model_id("m");
  exact.set_hash_scheme("vllm");
  exact.set_replica_id("r4");
  exact.set_timestamp_us(future);
  exact.add_prefixes()->set_prefix_hash(block_hash(100));
  exact.mutable_prefixes(0)->set_token_count(128);
  pb::CacheStateUpdate stats;
  stats.set_tenant_id("t");
  stats.set_model_id("m");
  stats.set_replica_id("r1");
  stats.set_timestamp_us(now - 1 * kMin);
  stats.mutable_stats()->set_hit_rate(0.5f);
  s.report({chain_update("t", "r1", future, {1, 2, 3, 4}), chain_update("t", "r2", future, {1, 2}),
            chain_update("t", "r3", now - 15 * kMin, {1, 2, 3, 4}), exact, stats,
            chain_update("t-chain", "rc", future, {1, 2, 3, 4}),
            chain_update("t-ttl", "old", now - 31 * kMin, {7}),
            chain_update("t-ttl", "young", now - 29 * kMin, {8})});

  SUBCASE("PREFIX_MATCH on a chain: depth-aware dp, floor drops the shallow replica") {
    auto r = s.lookup(chain_req("t", {1, 2, 3, 4, 5}));
    const std::int64_t answered = wall_us();
    CHECK(r.reason_code() == "PREFIX_MATCH");
    REQUIRE(r.replica_scores_size() == 2);
    check_score(r.replica_scores(0), "r1", 32.0, 64, 1.0, pb::CACHE_TIER_T1);
    // r3 was 15 min old at `now` by its producer clock: fresh = 1 − age/30 min
    // is 0.5 then and loses 1/1800 a second after; its score is 32 × fresh.
    const pb::ReplicaScore& r3 = r.replica_scores(1);
    CHECK(r3.replica_id() == "r3");
    CHECK(r3.matched_tokens() == 64);
    CHECK(r3.tier() == pb::CACHE_TIER_T1);
    check_decayed(r3.estimated_cache_hit_prob(), 0.5, 1.0 / 1800, now, answered);
    check_decayed(r3.score(), 16.0, 32.0 / 1800, now, answered);
    CHECK(r.lookup_latency_us() >= 0);
  }
  SUBCASE("PREFIX_MATCH on an exact hash") {
    const pb::LookupRouteRequest q = exact_100();
    auto r = s.lookup(q);
    CHECK(r.reason_code() == "PREFIX_MATCH");
    REQUIRE(r.replica_scores_size() == 1);
    check_score(r.replica_scores(0), "r4", 96.0, 128, 1.0, pb::CACHE_TIER_T1);
  }
  SUBCASE("TENANT_HOT on an exact miss") {
    pb::LookupRouteRequest q;
    q.set_tenant_id("t");
    q.set_model_id("m");
    q.set_hash_scheme("vllm");
    q.set_prefix_hash(block_hash(999));
    auto r = s.lookup(q);
    const std::int64_t answered = wall_us();
    CHECK(r.reason_code() == "TENANT_HOT");
    REQUIRE(r.replica_scores_size() == 1);
    const pb::ReplicaScore& hot = r.replica_scores(0);
    CHECK(hot.replica_id() == "r1");
    CHECK(hot.matched_tokens() == 0);
    CHECK(hot.estimated_cache_hit_prob() == 0.5);  // the hit rate, not decayed
    CHECK(hot.tier() == pb::CACHE_TIER_UNSPECIFIED);
    // The stats were 1 min old at `now`: score = hit_rate × (1 − age/5 min)
    // is 0.5 × 0.8 then and loses 0.5/300 a second after.
    check_decayed(hot.score(), 0.5 * 0.8, 0.5 / 300, now, answered);
  }
  SUBCASE("AFFINITY_HINT for a novel chain, stable across calls, adapter echoed") {
    auto q = chain_req("t", {77, 78});
    q.set_adapter_id("lora-z");
    auto r = s.lookup(q);
    CHECK(r.reason_code() == "AFFINITY_HINT");
    CHECK(r.adapter_id() == "lora-z");
    REQUIRE(r.replica_scores_size() == 1);
    check_score(r.replica_scores(0),
                ic::test::affinity_pick(ic::test::chain_seed({77, 78}), {"r1", "r2", "r3", "r4"}),
                0, 0, 0, pb::CACHE_TIER_UNSPECIFIED);
    CHECK(s.lookup(q).replica_scores(0).replica_id() == r.replica_scores(0).replica_id());
  }
  SUBCASE("UNKNOWN_TENANT / UNKNOWN_MODEL / UNKNOWN_HASH_SCHEME beat affinity") {
    CHECK(s.lookup(chain_req("nobody", {1})).reason_code() == "UNKNOWN_TENANT");
    CHECK(s.lookup(chain_req("t", {1}, "vllm", "other")).reason_code() == "UNKNOWN_MODEL");
    CHECK(s.lookup(chain_req("t", {1}, "sglang")).reason_code() == "UNKNOWN_HASH_SCHEME");
  }
  SUBCASE("malformed arrays fail open without the adapter echo") {
    auto q = chain_req("t", {1, 2});
    q.add_block_hashes(block_hash(3));
    q.set_adapter_id("lora-z");
    auto r = s.lookup(q);
    CHECK(r.reason_code() == "NO_HINT");
    CHECK(r.adapter_id() == "");
    CHECK(r.replica_scores_size() == 0);
  }
  SUBCASE("POLICY_REQUIRES_CHAIN from the policy file; a chain satisfies it") {
    pb::LookupRouteRequest q;
    q.set_tenant_id("t-chain");
    q.set_model_id("m");
    q.set_hash_scheme("vllm");
    q.set_prefix_hash(block_hash(4));
    CHECK(s.lookup(q).reason_code() == "POLICY_REQUIRES_CHAIN");
    auto r = s.lookup(chain_req("t-chain", {1, 2, 3, 4}));
    CHECK(r.reason_code() == "PREFIX_MATCH");
    REQUIRE(r.replica_scores_size() == 1);
    check_score(r.replica_scores(0), "rc", 64, 64, 1.0, pb::CACHE_TIER_T1);
  }
  SUBCASE("TTL: an entry 31 min old is absent, 29 min old is barely fresh") {
    auto old = s.lookup(chain_req("t-ttl", {7}));
    CHECK(old.reason_code() == "AFFINITY_HINT");
    auto young = s.lookup(chain_req("t-ttl", {8}));
    CHECK(young.reason_code() == "PREFIX_MATCH");
    REQUIRE(young.replica_scores_size() == 1);
    CHECK(young.replica_scores(0).replica_id() == "young");
    // fresh = 1 − 29/30 at ingest, a little less by now; t = 2, m = 1 → dp 0.5.
    CHECK(young.replica_scores(0).estimated_cache_hit_prob() ==
          doctest::Approx(1.0 / 30).epsilon(0.05));
    CHECK(young.replica_scores(0).score() == doctest::Approx(16.0 / 30 * 0.5).epsilon(0.05));
  }
  SUBCASE("reserved tenant answers NO_HINT") {
    auto r = s.lookup(chain_req("inferencecache.io/probe", {1, 2, 3, 4}));
    CHECK(r.reason_code() == "NO_HINT");
    CHECK(r.replica_scores_size() == 0);
  }
  SUBCASE("PREFIX_EVICTED removes the replica; GetCacheState counts distinct keys") {
    grpc::ClientContext ctx;
    pb::CacheEvent ev;
    ev.set_type(pb::CacheEvent::PREFIX_EVICTED);
    ev.set_tenant_id("t");
    ev.set_model_id("m");
    ev.set_replica_id("r4");
    ev.set_prefix_hash(block_hash(100));
    pb::Ack ack;
    REQUIRE(s.stub->PublishEvent(&ctx, ev, &ack).ok());
    CHECK(ack.accepted());
    const pb::LookupRouteRequest q = exact_100();
    CHECK(s.lookup(q).reason_code() == "TENANT_HOT");
    grpc::ClientContext gctx;
    pb::GetCacheStateRequest g;
    g.set_tenant_id("t");
    g.set_model_id("m");
    pb::GetCacheStateResponse out;
    REQUIRE(s.stub->GetCacheState(&gctx, g, &out).ok());
    CHECK(out.summary().total_prefixes() == 4);  // blocks 1..4; key 100 is gone
    REQUIRE(out.replicas_size() == 1);
    CHECK(out.replicas(0).replica_id() == "r1");
    CHECK(out.replicas(0).hit_rate() == 0.5f);
  }
  CHECK(s.server.stop() == 0);
}

TEST_CASE("TIMEOUT when the grpc-timeout has already passed (raw HTTP/2 client)") {
  Served s(write_policy(R"({"version":7})"), {"--threads", "2"});
  s.report({chain_update("t", "r1", wall_us() + 60 * kMin, {1, 2, 3, 4})});
  ic::itest::H2Client h2(s.server.grpc_port());
  const auto req = chain_req("t", {1, 2, 3, 4});
  const std::int32_t id = h2.start(ic::itest::method_path("LookupRoute"),
                                   {ic::itest::frame_message(req)}, {{"grpc-timeout", "1n"}});
  const auto& resp = h2.wait(id);
  REQUIRE(resp.grpc_status() == std::optional<int>(0));
  const auto out = ic::itest::parse_single<pb::LookupRouteResponse>(resp.body);
  CHECK(out.reason_code() == "TIMEOUT");
  CHECK(out.replica_scores_size() == 0);
  CHECK(out.adapter_id() == "");
  CHECK(s.server.stop() == 0);
}

TEST_CASE("tenants on every core are answered correctly from every connection") {
  constexpr unsigned kCores = 2;
  Served s(write_policy(R"({"version":7})"), {"--threads", "2"});
  // Tenants covering both owner cores: whichever core a connection lands on,
  // some of its calls must hop to the other core.
  std::vector<std::string> tenants;
  unsigned owners[kCores] = {0, 0};
  for (int i = 0; tenants.size() < 8; ++i) {
    std::string t = ic::itest::numbered("tenant-", i);
    const unsigned c = ic::index::owner_core(t, kCores);
    if (owners[c] >= 4) continue;
    ++owners[c];
    tenants.push_back(std::move(t));
  }
  REQUIRE(owners[0] == 4);
  REQUIRE(owners[1] == 4);
  const std::int64_t future = wall_us() + 60 * kMin;
  std::vector<pb::CacheStateUpdate> updates;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const auto base = static_cast<std::uint64_t>(1000 * (i + 1));
    updates.push_back(
        chain_update(tenants[i], "near", future, {base, base + 1, base + 2, base + 3}));
    updates.push_back(chain_update(tenants[i], "far", future, {base + 500}));
  }
  s.report(updates);
  // Separate connections (distinct channel arguments), spread by SO_REUSEPORT.
  for (int c = 0; c < 8; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("ic.test.connection", c);
    auto channel = ic::itest::insecure_channel(s.server.grpc_port(), args);
    auto stub = pb::InferenceCache::NewStub(channel);
    for (std::size_t i = 0; i < tenants.size(); ++i) {
      CAPTURE(c);
      CAPTURE(tenants[i]);
      const auto base = static_cast<std::uint64_t>(1000 * (i + 1));
      auto r = s.lookup(*stub, chain_req(tenants[i], {base, base + 1, base + 2, base + 3}));
      CHECK(r.reason_code() == "PREFIX_MATCH");
      REQUIRE(r.replica_scores_size() == 1);
      // t = 2 (near, far), m = 1: dp 0.5.
      check_score(r.replica_scores(0), "near", 32, 64, 1.0, pb::CACHE_TIER_T1);
      // Another tenant's chain is never visible: UNKNOWN codes stay per tenant.
      auto other = s.lookup(*stub, chain_req(tenants[(i + 1) % tenants.size()],
                                             {base, base + 1, base + 2, base + 3}));
      CHECK(other.reason_code() == "AFFINITY_HINT");
    }
  }
  CHECK(s.server.stop() == 0);
}

// The load-aware ranking (docs/ranking.md) on issue 9's two inputs, 512-token
// blocks, from a follower gateway's point of view.
TEST_CASE("load-aware server: a follower's hints spread over a cold scope and avoid saturation") {
  Served s(write_policy(R"({"version":7})"), {"--threads", "2", "--ranking", "load-aware"}, false);
  const std::int64_t future = wall_us() + 60 * kMin;
  auto with_blocks = [&](const std::string& tenant, const std::string& replica,
                         const std::vector<std::uint64_t>& blocks, float pressure) {
    pb::CacheStateUpdate u = chain_update(tenant, replica, future, blocks);
    if (blocks.empty()) {
      u.clear_prefixes();  // stats only
    } else {
      for (auto& c : *u.mutable_prefixes(0)->mutable_block_token_counts()) c = 512;
    }
    u.mutable_stats()->set_hit_rate(0.5f);
    u.mutable_stats()->set_pressure(pressure);
    return u;
  };
  auto request = [](const std::string& tenant, std::vector<std::uint64_t> blocks) {
    pb::LookupRouteRequest r = chain_req(tenant, std::move(blocks));
    for (auto& c : *r.mutable_block_token_counts()) c = 512;
    return r;
  };
  s.report({with_blocks("cold", "r0", {1000, 1001, 1002, 1003}, 0.0f),
            with_blocks("cold", "r1", {}, 0.0f), with_blocks("cold", "r2", {}, 0.0f),
            with_blocks("cold", "r3", {}, 0.0f),
            with_blocks("hot", "r0", {2000, 2001, 2002, 2003}, 1.0f),
            with_blocks("hot", "r1", {3000, 3001}, 0.0f),
            with_blocks("hot", "r2", {4000, 4001}, 0.2f)});
  std::map<std::string, int> cold, hot;
  for (std::uint64_t i = 0; i < 20; ++i) {
    const auto r = s.lookup(request("cold", {1000, 5000 + i}));
    REQUIRE(r.replica_scores_size() >= 1);
    ++cold[r.replica_scores(0).replica_id()];
  }
  for (std::uint64_t i = 0; i < 12; ++i) {
    const auto r = s.lookup(request("hot", {2000, 2001, 2002, 2003, 9000 + i}));
    CHECK(r.reason_code() == "AFFINITY_HINT");
    REQUIRE(r.replica_scores_size() == 1);
    ++hot[r.replica_scores(0).replica_id()];
  }
  // The same answers as the unit tests (tests/index/ranking_test.cc).
  CHECK(cold == std::map<std::string, int>{{"r0", 6}, {"r1", 5}, {"r2", 5}, {"r3", 4}});
  CHECK(hot == std::map<std::string, int>{{"r1", 8}, {"r2", 4}});
}
