// LookupRoute: every reason code, gate and precedence rule of docs/lookup.md,
// with exact replica order, scores (1e-6 relative), matched tokens,
// probabilities and tiers.

#include <doctest/doctest.h>

#include <functional>
#include <utility>
#include <vector>

#include "fingerprint/fingerprint.hh"
#include "helpers.hh"
#include "support/affinity.hh"

using namespace ic::index;
using namespace ic::index::test;
using T = pb::CacheTier;

namespace {

// The shared world: tenant t / model m / scheme vllm served by r1..r4.
//   r1: chain 1,2,3,4 (16 tokens each) fresh
//   r2: chain 1,2     3 min old  (fresh 0.9)
//   r3: chain 1,2,3,4 6 min old  (fresh 0.8)
//   r4: exact key 100 → 128 tokens, fresh
void world(Harness& h) {
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, {1, 2, 3, 4}));
  h.ingest(chain_update("t", "m", "vllm", "r2", kNow - 3 * kMin, {1, 2}));
  h.ingest(chain_update("t", "m", "vllm", "r3", kNow - 6 * kMin, {1, 2, 3, 4}));
  h.ingest(exact_update("t", "m", "vllm", "r4", kNow, {{100, 128}}));
}

using ic::test::affinity_pick;
using ic::test::chain_seed;

// The exact lookup of r4's key 100 (128 tokens), and r4's answer to it: one
// holder of four serving, dp 0.75.
pb::LookupRouteRequest key100() { return exact_req("t", "m", "vllm", 100, 128); }
const Want kR4Key100 = {"r4", 96.0, 128, 1.0, T::CACHE_TIER_T1};

// The world's answer to the chain 1..4 at the default floors: r1 64 × 0.5,
// r3 64 × fresh 0.8 × 0.5; r2, two blocks deep, below the floor.
const std::vector<Want> kChain4 = {{"r1", 32.0, 64, 1.0, T::CACHE_TIER_T1},
                                   {"r3", 25.6, 64, 0.8, T::CACHE_TIER_T1}};

// The chain 1..4 with an SLO of `ttft_ms`.
pb::LookupRouteRequest chain_with_ttft(std::int32_t ttft_ms) {
  auto r = chain_req("t", "m", "vllm", {1, 2, 3, 4});
  r.mutable_slo()->set_ttft_ms(ttft_ms);
  return r;
}

// A lookup carrying token ids 0..`n`-1 and nothing else.
pb::LookupRouteRequest token_ids(int n) {
  auto r = scoped_lookup("t", "m", "vllm");
  for (int i = 0; i < n; ++i) r.add_token_ids(i);
  return r;
}

// Tenant t's policy that requires a chain.
const char* kRequireChain =
    R"({"version":7,"policies":[{"namespace":"t","strategy":{"requireChain":true}}]})";

// Both forms at once: the chain 1..4 and key 100 in prefix_hash.
pb::LookupRouteRequest chain_and_key100() {
  auto r = chain_req("t", "m", "vllm", {1, 2, 3, 4});
  r.set_prefix_hash(hb(100));
  r.set_prefix_token_count(128);
  return r;
}

// An AFFINITY_HINT answer: the one replica the pick for `seed` names among
// the world's four, with no score.
std::vector<Want> hint(const std::string& seed) {
  return {{affinity_pick(seed, {"r1", "r2", "r3", "r4"}), 0, 0, 0, T::CACHE_TIER_UNSPECIFIED}};
}

struct Case {
  const char* name;
  std::function<pb::LookupRouteRequest()> req;
  const char* policy;  // JSON policy for tenant t, or nullptr
  std::string_view reason;
  std::vector<Want> want;
  bool echo;  // adapter_id echoed
};

}  // namespace

TEST_CASE("lookup table over one world") {
  const std::vector<Case> cases = {
      {"chain: longest leading run, depth-aware dp, floor drops r2",
       [] {
         return chain_req("t", "m", "vllm", {1, 2, 3, 4, 5});
       },
       nullptr,
       reason::kPrefixMatch,
       {{"r1", 64 * 1.0 * 0.5, 64, 1.0, T::CACHE_TIER_T1},
        {"r3", 64 * 0.8 * 0.5, 64, 0.8, T::CACHE_TIER_T1}},
       true},
      {"chain: floor 0 keeps the shallow replica with dp(3,4)",
       [] {
         return chain_req("t", "m", "vllm", {1, 2, 3, 4});
       },
       R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0}]})",
       reason::kPrefixMatch,
       {{"r1", 32.0, 64, 1.0, T::CACHE_TIER_T1},
        {"r3", 25.6, 64, 0.8, T::CACHE_TIER_T1},
        {"r2", 32 * 0.9 * 0.25, 32, 0.9, T::CACHE_TIER_T1}},
       true},
      {"chain: matched counts come from the REQUEST's block_token_counts",
       [] {
         return chain_req("t", "m", "vllm", {1, 2, 3}, 40);
       },
       nullptr,
       reason::kPrefixMatch,
       {{"r1", 120 * 0.5, 120, 1.0, T::CACHE_TIER_T1},
        {"r3", 120 * 0.8 * 0.5, 120, 0.8, T::CACHE_TIER_T1},
        {"r2", 80 * 0.9 * 0.25, 80, 0.9, T::CACHE_TIER_T1}},
       true},
      {"chain: SLO tight multiplies by 1 + fresh × bias",
       [] { return chain_with_ttft(100); },
       nullptr,
       reason::kPrefixMatch,
       {{"r1", 64 * 0.5 * 2.0, 64, 1.0, T::CACHE_TIER_T1},
        {"r3", 64 * 0.8 * 0.5 * 1.8, 64, 0.8, T::CACHE_TIER_T1}},
       true},
      {"chain: ttft 200 is not tight", [] { return chain_with_ttft(200); }, nullptr,
       reason::kPrefixMatch, kChain4, true},
      {"chain wins over prefix_hash when both are sent", chain_and_key100, nullptr,
       reason::kPrefixMatch, kChain4, true},
      {"chain matching disabled: prefix_hash exact path, arrays ignored",
       chain_and_key100,
       R"({"version":7,"policies":[{"namespace":"t","strategy":{"enableChainMatching":false}}]})",
       reason::kPrefixMatch,
       {kR4Key100},
       true},
      {"chain matching disabled and only arrays: fail-open NO_HINT",
       [] {
         return chain_req("t", "m", "vllm", {1, 2, 3, 4});
       },
       R"({"version":7,"policies":[{"namespace":"t","strategy":{"enableChainMatching":false}}]})",
       reason::kNoHint,
       {},
       false},
      {"exact: one holder of four serving, dp 0.75",
       key100,
       nullptr,
       reason::kPrefixMatch,
       {kR4Key100},
       true},
      {"exact: block 4 key also answers an exact lookup (token_count cumulative)",
       [] { return exact_req("t", "m", "vllm", 4, 64); },
       nullptr,
       reason::kPrefixMatch,
       {{"r1", 64 * 0.5, 64, 1.0, T::CACHE_TIER_T1},
        {"r3", 64 * 0.8 * 0.5, 64, 0.8, T::CACHE_TIER_T1}},
       true},
      {"malformed arrays: NO_HINT, never the legacy field, no adapter echo",
       [] {
         auto r = chain_req("t", "m", "vllm", {1, 2});
         r.add_block_hashes(hb(3));
         r.set_prefix_hash(hb(100));
         return r;
       },
       nullptr,
       reason::kNoHint,
       {},
       false},
      {"counts without hashes are malformed too",
       [] {
         auto r = exact_req("t", "m", "vllm", 100, 128);
         r.add_block_token_counts(16);
         return r;
       },
       nullptr,
       reason::kNoHint,
       {},
       false},
      {"unknown tenant beats affinity",
       [] { return chain_req("nobody", "m", "vllm", {1}); },
       nullptr,
       reason::kUnknownTenant,
       {},
       true},
      {"unknown model",
       [] { return exact_req("t", "other", "vllm", 100, 128); },
       nullptr,
       reason::kUnknownModel,
       {},
       true},
      {"unknown hash scheme",
       [] {
         return chain_req("t", "m", "sglang", {1, 2, 3, 4});
       },
       nullptr,
       reason::kUnknownHashScheme,
       {},
       true},
      {"empty tenant / model / scheme: NO_HINT and no affinity",
       [] {
         return chain_req("t", "m", "", {1, 2, 3, 4});
       },
       nullptr,
       reason::kNoHint,
       {},
       true},
      {"empty model",
       [] { return exact_req("t", "", "vllm", 100, 128); },
       nullptr,
       reason::kNoHint,
       {},
       true},
      {"novel chain in a known scope: AFFINITY_HINT",
       [] {
         return chain_req("t", "m", "vllm", {77, 78});
       },
       nullptr, reason::kAffinityHint, hint(chain_seed({77, 78})), true},
      {"novel exact hash: AFFINITY_HINT seeded by the raw hash bytes",
       [] { return exact_req("t", "m", "vllm", 555, 64); }, nullptr, reason::kAffinityHint,
       hint(hb(555)), true},
      {"novel chain with affinity disabled: NO_HINT",
       [] { return chain_req("t", "m", "vllm", {77}); },
       R"({"version":7,"policies":[{"namespace":"t","affinityRouting":false}]})",
       reason::kNoHint,
       {},
       true},
      {"nothing supplied: exact on empty hash, no seed → NO_HINT",
       [] {
         auto r = scoped_lookup("t", "m", "vllm");
         return r;
       },
       nullptr,
       reason::kNoHint,
       {},
       true},
      {"unseen adapter in a known domain is a plain miss, not UNKNOWN_HASH_SCHEME",
       [] {
         auto r = chain_req("t", "m", "vllm", {1, 2, 3, 4});
         r.set_adapter_id("lora-x");
         return r;
       },
       nullptr, reason::kAffinityHint, hint(chain_seed({1, 2, 3, 4})), true},
      {"below routing floor → AFFINITY_HINT (floor 100 over top 32)",
       [] {
         return chain_req("t", "m", "vllm", {1, 2, 3, 4});
       },
       R"({"version":7,"policies":[{"namespace":"t","routingFloorScore":100}]})",
       reason::kAffinityHint, hint(chain_seed({1, 2, 3, 4})), true},
      {"routing floor 0 disabled: tiny scores still match",
       key100,
       R"({"version":7,"policies":[{"namespace":"t","routingFloorScore":0}]})",
       reason::kPrefixMatch,
       {kR4Key100},
       true},
      {"minimumPrefixTokens, affinity disabled: NO_HINT before the index",
       key100,
       R"({"version":7,"policies":[{"namespace":"t","minimumPrefixTokens":129,"affinityRouting":false}]})",
       reason::kNoHint,
       {},
       true},
      {"minimumPrefixTokens, affinity enabled: PREFIX_MATCH demoted to AFFINITY_HINT", key100,
       R"({"version":7,"policies":[{"namespace":"t","minimumPrefixTokens":129}]})",
       reason::kAffinityHint, hint(hb(100)), true},
      {"minimumPrefixTokens met exactly",
       key100,
       R"({"version":7,"policies":[{"namespace":"t","minimumPrefixTokens":128}]})",
       reason::kPrefixMatch,
       {kR4Key100},
       true},
      {"requireChain without a chain",
       key100,
       kRequireChain,
       reason::kPolicyRequiresChain,
       {},
       false},
      {"requireChain: token_ids do not count",
       [] { return token_ids(32); },
       kRequireChain,
       reason::kPolicyRequiresChain,
       {},
       false},
      {"requireChain with a malformed chain",
       [] {
         auto r = chain_req("t", "m", "vllm", {1, 2});
         r.add_block_token_counts(3);
         return r;
       },
       kRequireChain,
       reason::kPolicyRequiresChain,
       {},
       false},
      {"requireChain satisfied",
       [] {
         return chain_req("t", "m", "vllm", {1, 2, 3, 4});
       },
       kRequireChain, reason::kPrefixMatch, kChain4, true},
      {"prompt_text without a tokenizer: fail-open NO_HINT",
       [] {
         auto r = scoped_lookup("t", "m", "vllm");
         r.set_prompt_text("hello world");
         return r;
       },
       nullptr,
       reason::kNoHint,
       {},
       false},
      {"token_ids shorter than one block: NO_HINT",
       [] { return token_ids(15); },
       nullptr,
       reason::kNoHint,
       {},
       false},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    Harness h;
    world(h);
    if (c.policy) h.policy(c.policy);
    const auto req = c.req();
    const auto r = h.lookup(req);
    CHECK(r.reason_code() == c.reason);
    check_scores(r, c.want);
    CHECK(r.adapter_id() == (c.echo ? req.adapter_id() : ""));
    CHECK(r.token_ids_size() == 0);
    CHECK(r.lookup_latency_us() == 0);  // frozen monotonic clock
  }
}

TEST_CASE("cold start: a globally empty index stays NO_HINT; diagnostics resume after one report") {
  Harness h;
  CHECK(h.lookup(chain_req("t", "m", "vllm", {1})).reason_code() == reason::kNoHint);
  CHECK(h.lookup(exact_req("t", "m", "vllm", 1, 16)).reason_code() == reason::kNoHint);
  // Stats alone are not presence.
  pb::CacheStateUpdate stats_only;
  stats_only.set_tenant_id("s");
  stats_only.set_model_id("m");
  stats_only.set_replica_id("rs");
  stats_only.mutable_stats()->set_hit_rate(0.9f);
  h.ingest(stats_only);
  CHECK(h.lookup(exact_req("s", "m", "vllm", 1, 16)).reason_code() == reason::kNoHint);
  h.ingest(chain_update("other", "m", "vllm", "r1", kNow, {1}));
  CHECK(h.lookup(exact_req("s", "m", "vllm", 1, 16)).reason_code() == reason::kUnknownTenant);
  CHECK(h.lookup(chain_req("t", "m", "vllm", {1})).reason_code() == reason::kUnknownTenant);
}

TEST_CASE("cold start is global: another shard's entries end the carve-out") {
  IndexGlobals g;
  Harness a({}, &g);
  Harness b({}, &g);
  CHECK(a.lookup(chain_req("t", "m", "vllm", {1})).reason_code() == reason::kNoHint);
  b.ingest(chain_update("u", "m", "vllm", "r1", kNow, {1}));
  CHECK(g.total_entries.load() == 1);
  CHECK(a.lookup(chain_req("t", "m", "vllm", {1})).reason_code() == reason::kUnknownTenant);
}

TEST_CASE("TENANT_HOT: recent stats, hit-rate floor, scope membership, pressure and SLO") {
  Harness h;
  world(h);
  auto stats = [&](const std::string& replica, float hit, float pressure, std::int64_t ts) {
    pb::CacheStateUpdate u = scoped_update("t", "m", "vllm", replica, ts);
    u.mutable_stats()->set_hit_rate(hit);
    u.mutable_stats()->set_pressure(pressure);
    h.ingest(u);
  };
  stats("r1", 0.5f, 0.25f, kNow - 1 * kMin);  // recency 0.8, pf 0.75
  stats("r2", 0.05f, 0.0f, kNow);             // below the hit-rate floor
  stats("r3", 0.9f, 0.0f, kNow - 5 * kMin);   // window is 5 min: too old
  stats("r9", 0.9f, 0.0f, kNow);              // not serving the scope
  stats("r4", 0.1f, 0.0f, kNow - 4 * kMin);   // exactly the floor, recency 0.2
  auto r = h.lookup(exact_req("t", "m", "vllm", 999, 64));
  CHECK(r.reason_code() == reason::kTenantHot);
  check_scores(r, {{"r1", 0.5 * 0.8 * 0.75, 0, 0.5, T::CACHE_TIER_UNSPECIFIED},
                   {"r4", 0.1 * 0.2, 0, 0.1, T::CACHE_TIER_UNSPECIFIED}});
  auto tight = exact_req("t", "m", "vllm", 999, 64);
  tight.mutable_slo()->set_ttft_ms(50);
  check_scores(h.lookup(tight), {{"r1", 0.5 * 0.8 * 0.75 * 1.8, 0, 0.5, T::CACHE_TIER_UNSPECIFIED},
                                 {"r4", 0.1 * 0.2 * 1.2, 0, 0.1, T::CACHE_TIER_UNSPECIFIED}});
  // Chain requests never get TENANT_HOT: a novel chain goes to affinity.
  CHECK(h.lookup(chain_req("t", "m", "vllm", {999})).reason_code() == reason::kAffinityHint);
  // enableTenantHot=false: TENANT_HOT → none → AFFINITY_HINT (exact hash seed).
  h.policy(R"({"version":7,"policies":[{"namespace":"t","strategy":{"enableTenantHot":false}}]})");
  auto off = h.lookup(exact_req("t", "m", "vllm", 999, 64));
  CHECK(off.reason_code() == reason::kAffinityHint);
  check_scores(off, hint(hb(999)));
  // Below minimumPrefixTokens a TENANT_HOT result is demoted as well.
  h.policy(R"({"version":7,"policies":[{"namespace":"t","minimumPrefixTokens":65}]})");
  CHECK(h.lookup(exact_req("t", "m", "vllm", 999, 64)).reason_code() == reason::kAffinityHint);
  // Nothing supplied: exact path on an empty hash still reaches TENANT_HOT.
  h.policy(R"({"version":7})");
  pb::LookupRouteRequest empty = scoped_lookup("t", "m", "vllm");
  CHECK(h.lookup(empty).reason_code() == reason::kTenantHot);
  // TENANT_HOT window 0 disables it.
  IndexConfig cfg;
  cfg.tenant_hot_window_us = 0;
  Harness h2(cfg);
  world(h2);
  CHECK(h2.lookup(empty).reason_code() == reason::kNoHint);
}

TEST_CASE("pressure factor comes from fresh stats only") {
  Harness h;
  world(h);
  pb::CacheStateUpdate u;
  u.set_tenant_id("t");
  u.set_model_id("m");
  u.set_replica_id("r1");
  u.set_timestamp_us(kNow);
  u.mutable_stats()->set_pressure(0.5f);
  h.ingest(u);
  check_scores(h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})),
               {{"r3", 25.6, 64, 0.8, T::CACHE_TIER_T1}, {"r1", 16.0, 64, 1.0, T::CACHE_TIER_T1}});
  // Pressure > 1 clamps the factor to 0.
  u.mutable_stats()->set_pressure(3.0f);
  h.ingest(u);
  check_scores(h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})),
               {{"r3", 25.6, 64, 0.8, T::CACHE_TIER_T1}, {"r1", 0.0, 64, 1.0, T::CACHE_TIER_T1}});
  // Stats reported a TTL ago are stale: pressure counts as 0.
  u.set_timestamp_us(kNow - 30 * kMin);
  h.ingest(u);
  check_scores(h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})),
               {{"r1", 32.0, 64, 1.0, T::CACHE_TIER_T1}, {"r3", 25.6, 64, 0.8, T::CACHE_TIER_T1}});
}

TEST_CASE("equal scores order by replica_id bytewise; single replica dp is 1") {
  Harness h;
  h.ingest(exact_update("t", "m", "vllm", "rB", kNow, {{7, 100}}));
  h.ingest(exact_update("t", "m", "vllm", "rA", kNow, {{7, 100}}));
  h.ingest(exact_update("t", "m", "vllm", "rC", kNow, {{8, 100}}));
  h.ingest(exact_update("t", "m", "vllm", "ra", kNow, {{8, 100}}));
  // t = 4, m = 2: dp 0.5.
  check_scores(h.lookup(exact_req("t", "m", "vllm", 7, 100)),
               {{"rA", 50, 100, 1, T::CACHE_TIER_T1}, {"rB", 50, 100, 1, T::CACHE_TIER_T1}});
  Harness one;
  one.ingest(exact_update("t", "m", "vllm", "solo", kNow, {{7, 100}}));
  check_scores(one.lookup(exact_req("t", "m", "vllm", 7, 100)),
               {{"solo", 100, 100, 1, T::CACHE_TIER_T1}});
  // Two replicas at the same depth and nobody else: dp 0 → below the floor → affinity.
  Harness two;
  two.ingest(chain_update("t", "m", "vllm", "x", kNow, {1, 2, 3, 4}));
  two.ingest(chain_update("t", "m", "vllm", "y", kNow, {1, 2, 3, 4}));
  auto r = two.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4}));
  CHECK(r.reason_code() == reason::kAffinityHint);
  check_scores(r, {{affinity_pick(chain_seed({1, 2, 3, 4}), {"x", "y"}), 0, 0, 0,
                    T::CACHE_TIER_UNSPECIFIED}});
  // Same prompt → same replica.
  CHECK(two.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})).replica_scores(0).replica_id() ==
        r.replica_scores(0).replica_id());
}

TEST_CASE("adapter partitions: keys per adapter, scope adapter-blind, echo") {
  Harness h;
  h.ingest(chain_update("t", "m", "vllm", "rl", kNow, {1, 2, 3, 4}, 0, "lora-a"));
  h.ingest(chain_update("t", "m", "vllm", "rb", kNow, {1, 2, 3, 4}));
  h.ingest(chain_update("t", "m", "vllm", "rc", kNow, {50}));
  auto req = chain_req("t", "m", "vllm", {1, 2, 3, 4});
  // Default partition: only rb; t = 3 (scope is adapter-blind), m = 1.
  auto r = h.lookup(req);
  CHECK(r.reason_code() == reason::kPrefixMatch);
  CHECK(r.adapter_id() == "");
  check_scores(r, {{"rb", 64 * (2.0 / 3.0), 64, 1, T::CACHE_TIER_T1}});
  req.set_adapter_id("lora-a");
  r = h.lookup(req);
  CHECK(r.adapter_id() == "lora-a");
  check_scores(r, {{"rl", 64 * (2.0 / 3.0), 64, 1, T::CACHE_TIER_T1}});
  // The update-level adapter applies when the entry has none.
  auto u = chain_update("t", "m", "vllm", "ru", kNow, {9, 10, 11, 12});
  u.set_adapter_id("lora-b");
  h.ingest(u);
  auto rb = chain_req("t", "m", "vllm", {9, 10, 11, 12});
  rb.set_adapter_id("lora-b");
  check_scores(h.lookup(rb), {{"ru", 64 * 0.75, 64, 1, T::CACHE_TIER_T1}});
  // An entry adapter overrides the update's.
  auto u2 = chain_update("t", "m", "vllm", "rv", kNow, {13, 14, 15, 16}, 0, "lora-c");
  u2.set_adapter_id("lora-b");
  h.ingest(u2);
  auto rc = chain_req("t", "m", "vllm", {13, 14, 15, 16});
  rc.set_adapter_id("lora-c");
  CHECK(h.lookup(rc).reason_code() == reason::kPrefixMatch);
  rc.set_adapter_id("lora-b");
  CHECK(h.lookup(rc).reason_code() == reason::kAffinityHint);
  // Adapter echo is suppressed on the fail-open NO_HINT.
  auto bad = chain_req("t", "m", "vllm", {1});
  bad.add_block_hashes(hb(2));
  bad.set_adapter_id("lora-a");
  auto nb = h.lookup(bad);
  CHECK(nb.reason_code() == reason::kNoHint);
  CHECK(nb.adapter_id() == "");
}

TEST_CASE("tiers: UNSPECIFIED stored as T1, last write wins, chain reports the coldest") {
  Harness h;
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{1, 100}}, 0));
  auto req = exact_req("t", "m", "vllm", 1, 100);
  CHECK(h.lookup(req).replica_scores(0).tier() == T::CACHE_TIER_T1);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{1, 100}}, 2));
  CHECK(h.lookup(req).replica_scores(0).tier() == T::CACHE_TIER_T2);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{1, 100}}, 1));
  CHECK(h.lookup(req).replica_scores(0).tier() == T::CACHE_TIER_T1);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{1, 100}}, 3));
  CHECK(h.lookup(req).replica_scores(0).tier() == T::CACHE_TIER_T3);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{1, 100}}, 9));  // unknown → invalid
  CHECK(h.lookup(req).replica_scores(0).tier() == T::CACHE_TIER_UNSPECIFIED);
  h.ingest(exact_update("t", "m", "vllm", "r", kNow, {{1, 100}}, -1));  // negative → invalid
  CHECK(h.lookup(req).replica_scores(0).tier() == T::CACHE_TIER_UNSPECIFIED);

  h.ingest(chain_update("t", "m", "vllm", "r", kNow, {10, 11, 12, 13}, 1));
  h.ingest(chain_update("t", "m", "vllm", "r", kNow, {10, 11}, 2));  // re-report 2 blocks at T2
  auto chain = chain_req("t", "m", "vllm", {10, 11, 12, 13});
  CHECK(h.lookup(chain).replica_scores(0).tier() == T::CACHE_TIER_T2);
  h.ingest(chain_update("t", "m", "vllm", "r", kNow, {10}, 1));
  CHECK(h.lookup(chain).replica_scores(0).tier() == T::CACHE_TIER_T2);  // block 11 still T2
  h.ingest(chain_update("t", "m", "vllm", "r", kNow, {10, 11}, 1));
  CHECK(h.lookup(chain).replica_scores(0).tier() == T::CACHE_TIER_T1);
  h.ingest(chain_update("t", "m", "vllm", "r", kNow, {10, 11, 12}, 7));
  CHECK(h.lookup(chain).replica_scores(0).tier() == T::CACHE_TIER_UNSPECIFIED);
}

TEST_CASE("reserved tenant: ingest dropped, NO_HINT with zero latency, empty state") {
  Harness h;
  const std::string probe = "inferencecache.io/probe";
  auto res = h.ingest(chain_update(probe, "m", "vllm", "r", kNow, {1, 2, 3, 4}));
  CHECK(res.dropped_reserved);
  CHECK(h.shard->entry_count() == 0);
  h.clock.mono_step_us = 1000;
  auto r = h.lookup(chain_req(probe, "m", "vllm", {1, 2, 3, 4}));
  CHECK(r.reason_code() == reason::kNoHint);
  CHECK(r.lookup_latency_us() == 0);
  CHECK(r.replica_scores_size() == 0);
  const pb::GetCacheStateResponse out = h.cache_state(probe, "m");
  CHECK(out.replicas_size() == 0);
  CHECK(out.summary().total_prefixes() == 0);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, probe, "m", "r") == 0);
  CHECK(h.shard->collect_snapshot().tenants.empty());
}

TEST_CASE("for_each_reporter: GetCacheState's replicas in report order, bounded; of every model") {
  Harness h;
  auto report = [&h](const char* model, const char* replica, float pressure,
                     const char* tenant = "t", std::int64_t at = kNow) {
    pb::CacheStateUpdate u;
    u.set_tenant_id(tenant);
    u.set_model_id(model);
    u.set_replica_id(replica);
    u.set_timestamp_us(at);
    u.mutable_stats()->set_pressure(pressure);
    h.ingest(u);
  };
  report("m", "r3", 0.3f);
  report("m", "r1", 0.1f);
  report("m", "r2", 0.2f);
  report("m2", "r2", 0.05f);
  report("m2", "r4", 0.4f);
  using Seen = std::vector<std::pair<std::string, float>>;
  auto visit = [&h](const char* tenant, const char* model, std::size_t max_visits,
                    std::size_t stop_after) {
    Seen seen;
    auto fn = [&seen, stop_after](std::string_view replica, float pressure) {
      seen.emplace_back(replica, pressure);
      return seen.size() < stop_after;
    };
    if (model == nullptr) {
      h.shard->for_each_reporter_any_model(tenant, max_visits, fn);
    } else {
      h.shard->for_each_reporter(tenant, model, max_visits, fn);
    }
    return seen;
  };
  CHECK(visit("t", "m", 10, 10) == Seen{{"r3", 0.3f}, {"r1", 0.1f}, {"r2", 0.2f}});
  CHECK(visit("t", "m", 2, 10) == Seen{{"r3", 0.3f}, {"r1", 0.1f}});  // the visit budget
  CHECK(visit("t", "m", 10, 1) == Seen{{"r3", 0.3f}});                // fn said stop
  CHECK(visit("t", "other", 10, 10).empty());
  CHECK(visit("inferencecache.io/probe", "m", 10, 10).empty());
  // Every model, in the order the models were first reported; one budget for all.
  CHECK(visit("t", nullptr, 10, 10) ==
        Seen{{"r3", 0.3f}, {"r1", 0.1f}, {"r2", 0.2f}, {"r2", 0.05f}, {"r4", 0.4f}});
  // Each model costs a visit too: m, its three, m2, then the budget is spent.
  CHECK(visit("t", nullptr, 5, 10) == Seen{{"r3", 0.3f}, {"r1", 0.1f}, {"r2", 0.2f}});
  CHECK(visit("t", nullptr, 10, 2) == Seen{{"r3", 0.3f}, {"r1", 0.1f}});
  CHECK(visit("nobody", nullptr, 10, 10).empty());
  // A model whose stats expire leaves its tenant's list; the last model takes its place.
  report("a", "ra", 0.f, "u", kNow - 40 * kMin);
  report("b", "rb", 0.f, "u");
  report("c", "rc", 0.f, "u");
  CHECK(visit("u", nullptr, 10, 10) == Seen{{"ra", 0.f}, {"rb", 0.f}, {"rc", 0.f}});
  while (!h.shard->sweep_slice(h.clock.wall, 1000)) {
  }
  CHECK(visit("u", nullptr, 10, 10) == Seen{{"rc", 0.f}, {"rb", 0.f}});
  report("d", "rd", 0.f, "u");
  CHECK(visit("u", nullptr, 10, 10) == Seen{{"rc", 0.f}, {"rb", 0.f}, {"rd", 0.f}});
  CHECK(visit("u", "a", 10, 10).empty());
}

TEST_CASE("TIMEOUT: highest precedence, from lookupTimeoutMs or the caller's deadline") {
  Harness h;
  world(h);
  // Each monotonic read advances 3 ms: start, step 3 (+3 ms), after resolution (+6 ms).
  h.clock.mono_step_us = 3000;
  h.policy(
      R"({"version":7,"policies":[{"namespace":"t","lookupTimeoutMs":5,"strategy":{"requireChain":true}}]})");
  auto r = h.lookup(exact_req("t", "m", "vllm", 100, 128));  // would be POLICY_REQUIRES_CHAIN
  CHECK(r.reason_code() == reason::kPolicyRequiresChain);    // step 3 sees +3 ms < 5 ms
  r = h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4}));
  CHECK(r.reason_code() == reason::kTimeout);  // after resolution: +6 ms ≥ 5 ms
  CHECK(r.replica_scores_size() == 0);
  CHECK(r.lookup_latency_us() == 9000);  // the final read
  h.policy(R"({"version":7,"policies":[{"namespace":"t","lookupTimeoutMs":2}]})");
  r = h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4}));
  CHECK(r.reason_code() == reason::kTimeout);  // at step 3
  CHECK(r.lookup_latency_us() == 6000);
  // A caller deadline already in the past.
  h.clock.mono_step_us = 0;
  h.policy(R"({"version":7})");
  auto req = chain_req("t", "m", "vllm", {1, 2, 3, 4});
  req.set_adapter_id("x");
  r = h.lookup(req, h.clock.mono - 1);
  CHECK(r.reason_code() == reason::kTimeout);
  CHECK(r.adapter_id() == "");
  CHECK(h.lookup(req, h.clock.mono + 1).reason_code() == reason::kAffinityHint);
  // lookupTimeoutMs ≤ 0 means none.
  h.clock.mono_step_us = 1'000'000;
  CHECK(h.lookup(chain_req("t", "m", "vllm", {1, 2, 3, 4})).reason_code() == reason::kPrefixMatch);
}

TEST_CASE("token_ids resolve through the fingerprint with the engine block size") {
  IndexConfig cfg;
  cfg.engine_block_size = 4;
  Harness h(cfg);
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t i = 0; i < 70; ++i) tokens.push_back(1000 + i);
  // The producer reports the chain of the first 64 tokens (16 blocks of 4).
  const auto chain =
      ic::fingerprint::prefix_hashes(std::span<const std::uint32_t>(tokens.data(), 64), 4);
  REQUIRE(chain.size() == 16);
  std::vector<std::uint64_t> blocks(chain.begin(), chain.end());
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, blocks, 0, "", 4));
  h.ingest(chain_update("t", "m", "vllm", "r2", kNow, {blocks[0]}, 0, "", 4));
  pb::LookupRouteRequest req = scoped_lookup("t", "m", "vllm");
  for (auto t : tokens) req.add_token_ids(t);  // 70 tokens: 17 full blocks, tail dropped
  auto r = h.lookup(req);
  CHECK(r.reason_code() == reason::kPrefixMatch);
  check_scores(r, {{"r1", 64 * 0.5, 64, 1, T::CACHE_TIER_T1}});
  CHECK(r.token_ids_size() == 0);  // echo only on the prompt_text path
  // With chain matching disabled token_ids become the exact key of the last
  // block with the total count: 17 blocks → the 17th hash, unknown → affinity.
  h.policy(
      R"({"version":7,"policies":[{"namespace":"t","strategy":{"enableChainMatching":false}}]})");
  std::vector<std::uint32_t> first64(tokens.begin(), tokens.begin() + 64);
  pb::LookupRouteRequest exact = req;
  exact.clear_token_ids();
  for (auto t : first64) exact.add_token_ids(t);
  check_scores(h.lookup(exact), {{"r1", 64 * 0.5, 64, 1, T::CACHE_TIER_T1}});
  // Over the limit: fail open.
  IndexConfig small;
  small.max_token_ids = 10;
  Harness h2(small);
  h2.ingest(chain_update("t", "m", "vllm", "r1", kNow, blocks));
  CHECK(h2.lookup(req).reason_code() == reason::kNoHint);
}

TEST_CASE("repeated names: the next lookup sees a new policy, a removed domain and reused ids") {
  Harness h;
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{7, 100}}));
  h.ingest(exact_update("t", "m", "vllm", "r2", kNow, {{8, 100}}));
  const auto req = exact_req("t", "m", "vllm", 7, 100);
  // t = 2, m = 1: dp 0.5; the second lookup takes the remembered names.
  for (int i = 0; i < 2; ++i) {
    const auto r = h.lookup(req);
    CHECK(r.reason_code() == reason::kPrefixMatch);
    check_scores(r, {{"r1", 50, 100, 1, T::CACHE_TIER_T1}});
  }
  // A new policy set applies to the next lookup of the same names.
  h.policy(R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":101,)"
           R"("affinityRouting":false}]})");
  auto r = h.lookup(req);
  CHECK(r.reason_code() == reason::kNoHint);
  check_scores(r, {});
  h.policy(R"({"version":7,"policies":[{"namespace":"other","affinityRouting":false}]})");
  check_scores(h.lookup(req), {{"r1", 50, 100, 1, T::CACHE_TIER_T1}});
  // The domain goes; another tenant's names take its slot and the same ids.
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "r1") == 1);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "r2") == 1);
  h.ingest(exact_update("u", "m", "vllm", "r3", kNow, {{7, 100}}));
  r = h.lookup(req);
  CHECK(r.reason_code() == reason::kUnknownTenant);
  check_scores(r, {});
  check_scores(h.lookup(exact_req("u", "m", "vllm", 7, 100)),
               {{"r3", 100, 100, 1, T::CACHE_TIER_T1}});
}
