// The replay's simulation and routing without a server (a recording fake IndexClient). The
// golden hit-token counts were computed independently by tests/tools/replay_golden.py.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "common/trace.hh"
#include "replay/accounting.hh"
#include "replay/chart.hh"
#include "replay/replay_run.hh"
#include "replay/router.hh"

using namespace ic::tools;
using namespace ic::tools::replay;
namespace v1 = inferencecache::v1alpha1;

namespace {

std::vector<TraceRequest> shared_trace(std::int64_t limit) {
  const char* dir = std::getenv("IC_SHARED_DATA");
  REQUIRE(dir != nullptr);
  auto load = load_trace(std::string(dir) + "/traces/mooncake_fast25_conversation_trace.jsonl",
                         BadLinePolicy::kFail, limit, [](const std::string&) {});
  REQUIRE(load.error.empty());
  return load.requests;
}

// Answers NO_HINT and records what the replay told the index.
class FakeClient final : public IndexClient {
 public:
  LookupCall lookup(const v1::LookupRouteRequest& request,
                    v1::LookupRouteResponse* response) override {
    tenants.insert(request.tenant_id());
    ++lookups;
    response->set_reason_code("NO_HINT");
    return {true, "OK", 3};
  }
  bool report(std::size_t stream, const v1::CacheStateUpdate& update, std::string*) override {
    streams.insert(stream);
    if (update.prefixes_size() > 0) ++stored_updates;
    if (update.has_stats()) ++stats_updates;
    if (update.hash_scheme() != "mooncake") bad_scheme = true;
    return true;
  }
  void publish(const v1::CacheEvent& event) override {
    if (event.type() == v1::CacheEvent::PREFIX_EVICTED) ++evicted_events;
    if (event.type() == v1::CacheEvent::ALL_CLEARED) ++cleared_events;
    if (event.prefix_hash().size() != 8 && event.type() == v1::CacheEvent::PREFIX_EVICTED) {
      bad_scheme = true;
    }
  }
  bool finish(std::string*) override {
    finished = true;
    return true;
  }
  std::int64_t failed_events() const override { return 0; }

  std::set<std::string> tenants;
  std::set<std::size_t> streams;
  std::int64_t lookups = 0, stored_updates = 0, stats_updates = 0, evicted_events = 0,
               cleared_events = 0;
  bool bad_scheme = false, finished = false;
};

ReplayResult run_fake(const std::vector<TraceRequest>& trace, ReplayOptions options,
                      FakeClient& client) {
  ProgressBar progress(static_cast<std::int64_t>(trace.size()), false);
  return run_replay(trace, options, client, progress);
}

}  // namespace

TEST_CASE("first 500 requests, 4 replicas x 400 blocks: round-robin hits the golden count") {
  const auto trace = shared_trace(500);
  ReplayOptions options;
  options.replicas = 4;
  options.capacity_blocks = 400;
  options.tenant_prefix = std::string("test");
  FakeClient client;
  const auto result = run_fake(trace, options, client);
  REQUIRE(result.policies.size() == 3);
  CHECK(result.requests_done == 500);
  CHECK(result.policies[0].policy == Policy::kRoundRobin);
  CHECK(result.policies[0].account.hit_tokens() == 253952);
  CHECK(result.policies[0].account.prompt_tokens() == 7124855);
  CHECK(result.policies[0].account.requests_per_replica() ==
        std::vector<std::int64_t>{125, 125, 125, 125});
  CHECK(result.policies[0].account.balance().overall == doctest::Approx(1.0));
  CHECK(result.bound.account().hit_tokens() == 1167589);
  // Each policy speaks for its own tenant; every lookup and store reached the client.
  CHECK(client.tenants ==
        std::set<std::string>{"test-round-robin", "test-least-loaded", "test-inferencecache"});
  CHECK(client.lookups == 1500);
  CHECK(client.stored_updates == 1500);
  CHECK(client.streams.size() == 12);
  CHECK(client.evicted_events ==
        result.policies[0].evictions + result.policies[1].evictions + result.policies[2].evictions);
  CHECK(client.evicted_events > 0);
  CHECK(client.cleared_events == 12);
  CHECK(client.stats_updates > 0);
  CHECK_FALSE(client.bad_scheme);
  CHECK(client.finished);
  // NO_HINT everywhere: the inferencecache policy degenerates to least-loaded, exactly.
  CHECK(result.policies[2].account.hit_tokens() == result.policies[1].account.hit_tokens());
  CHECK(result.policies[2].reasons.at("NO_HINT") == 500);
}

TEST_CASE("whole trace at the defaults: round-robin and the upper bound") {
  const auto trace = shared_trace(0);
  ReplayOptions options;
  options.policies = {Policy::kRoundRobin};
  options.clear_at_end = false;
  FakeClient client;
  const auto result = run_fake(trace, options, client);
  CHECK(result.policies[0].account.hit_tokens() == 13123055);
  CHECK(result.policies[0].account.prompt_tokens() == 144793823);
  CHECK(result.bound.account().hit_tokens() == 54098411);
  CHECK(result.bound.account().prompt_tokens() == 144793823);
  CHECK(client.cleared_events == 0);
}

TEST_CASE("replica ids") {
  CHECK(replica_id(3) == "replica-3");
  CHECK(replica_index("replica-3", 8) == 3u);
  CHECK_FALSE(replica_index("replica-8", 8).has_value());
  CHECK_FALSE(replica_index("replica-", 8).has_value());
  CHECK_FALSE(replica_index("replica-1x", 8).has_value());
  CHECK_FALSE(replica_index("other-1", 8).has_value());
}

TEST_CASE("routing policies") {
  EngineModel model;
  model.slots = 1;
  model.decode_ms_per_token = 1000;  // every request runs 1 s per output token
  Cluster cluster(3, 10, model);
  TraceRequest r{0, 100, 5, {42}};

  SUBCASE("round-robin cycles whatever the hint") {
    Router router(Policy::kRoundRobin, 3);
    v1::LookupRouteResponse hint;
    hint.set_reason_code("PREFIX_MATCH");
    hint.add_replica_scores()->set_replica_id("replica-2");
    CHECK(router.choose(cluster, 0, 1, &hint).replica == 0);
    CHECK(router.choose(cluster, 0, 1, &hint).replica == 1);
    CHECK(router.choose(cluster, 0, 1, nullptr).replica == 2);
    CHECK(router.choose(cluster, 0, 1, nullptr).replica == 0);
  }
  SUBCASE("least-loaded prefers idle, then fewer served, then the lowest index") {
    Router router(Policy::kLeastLoaded, 3);
    cluster.serve(0, r);  // replica 0 busy until 5010 ms (10 ms prefill + 5 s decode)
    CHECK(router.choose(cluster, 10, 1, nullptr).replica == 1);
    cluster.serve(1, r);
    CHECK(router.choose(cluster, 10, 1, nullptr).replica == 2);
    // At 6000 ms all are idle; 2 has served nothing.
    CHECK(router.choose(cluster, 6000, 1, nullptr).replica == 2);
  }
  SUBCASE("inferencecache follows the best unsaturated hinted replica") {
    Router router(Policy::kInferenceCache, 3);
    v1::LookupRouteResponse hint;
    hint.set_reason_code("PREFIX_MATCH");
    hint.add_replica_scores()->set_replica_id("replica-2");
    hint.add_replica_scores()->set_replica_id("replica-1");
    auto choice = router.choose(cluster, 0, 1, &hint);
    CHECK(choice.replica == 2);
    CHECK(choice.followed_hint);
    cluster.serve(2, r);  // replica 2 is now saturated (1 slot)
    choice = router.choose(cluster, 0, 1, &hint);
    CHECK(choice.replica == 1);
    CHECK(choice.saturated_override);
    cluster.serve(1, r);
    choice = router.choose(cluster, 0, 1, &hint);
    CHECK(choice.replica == 0);  // every hinted replica saturated: least-loaded
    CHECK_FALSE(choice.followed_hint);
    hint.set_reason_code("AFFINITY_HINT");
    CHECK(router.choose(cluster, 6000, 1, &hint).replica == 2);
    hint.set_reason_code("TENANT_HOT");
    CHECK(router.choose(cluster, 6000, 1, &hint).replica == 0);
  }
}

TEST_CASE("the follow gateway takes the top hint as given; the cost router prices every cache") {
  EngineModel model;
  model.slots = 1;
  model.decode_ms_per_token = 1000;
  Cluster cluster(3, 10, model);
  TraceRequest r{0, 100, 5, {42}};

  SUBCASE("follow: the top replica even when saturated; least-loaded on other answers") {
    Router router(Policy::kInferenceCache, 3, Gateway::kFollow);
    v1::LookupRouteResponse hint;
    hint.set_reason_code("PREFIX_MATCH");
    hint.add_replica_scores()->set_replica_id("replica-2");
    hint.add_replica_scores()->set_replica_id("replica-1");
    cluster.serve(2, r);  // replica 2 saturated (1 slot)
    auto choice = router.choose(cluster, 0, 1, &hint);
    CHECK(choice.replica == 2);
    CHECK(choice.followed_hint);
    CHECK_FALSE(choice.saturated_override);
    hint.set_reason_code("NO_HINT");
    CHECK(router.choose(cluster, 0, 1, &hint).replica == 0);
    CHECK(router.choose(cluster, 0, 1, nullptr).replica == 0);
  }
  SUBCASE("cost router: missed blocks + requests among the last 64 assignments") {
    Router router(Policy::kCostRouter, 3);
    TraceRequest warm{0, 2048, 0, {1, 2, 3, 4}};
    cluster.serve(1, warm);  // replica 1 caches all four blocks
    // Replica 1 misses 0 blocks; the others 4. Replica 1 wins until it carries
    // 4 more of the last assignments than the others: its 5th request ties
    // (4 + 0 against 0 + 4) and the lowest index, 0, wins the tie.
    for (int i = 0; i < 4; ++i) CHECK(router.choose(cluster, warm, 1, nullptr).replica == 1);
    CHECK(router.choose(cluster, warm, 1, nullptr).replica == 0);
    // The 64-assignment window: after 64 more requests elsewhere the early ones
    // no longer count.
    TraceRequest other{0, 512, 0, {99}};
    std::array<int, 3> seen{};
    for (int i = 0; i < 64; ++i) ++seen[router.choose(cluster, other, 1, nullptr).replica];
    // Every replica misses the one block: the load term alone spreads them, and
    // replica 1's four early requests leave the window as these come in.
    CHECK(seen == std::array<int, 3>{21, 22, 21});
    CHECK(router.choose(cluster, warm, 1, nullptr).replica == 1);
  }
}

TEST_CASE("the chart's load panel: one bar per replica per policy, labelled with max/mean") {
  const auto svg = render_replay_svg("t", {{"a", {0.1, 0.2}, false}}, 1.0,
                                     {{"rr", {1.0, 1.0}}, {"hot", {2.0, 0.0}}});
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"740\"", 0) ==
        0);
  CHECK(svg.ends_with("</svg>\n"));
  std::size_t bars = 0;
  for (auto at = svg.find("<rect x="); at != std::string::npos; at = svg.find("<rect x=", at + 1))
    ++bars;
  CHECK(bars == 1 + 4);  // the hit-ratio plot frame + 2 × 2 bars
  CHECK(svg.find(">rr (1.00)</text>") != std::string::npos);
  CHECK(svg.find(">hot (2.00)</text>") != std::string::npos);
}

TEST_CASE("cluster hit tokens count the partial last block and shorten service") {
  EngineModel model;  // 10 tokens/ms prefill, 20 ms per output token
  Cluster cluster(1, 10, model);
  TraceRequest a{0, 1100, 0, {1, 2, 3}};
  auto first = cluster.serve(0, a);
  CHECK(first.hit_tokens == 0);
  CHECK(cluster.in_flight(0, 109) == 1);  // 1100 tokens / 10 per ms = 110 ms
  CHECK(cluster.in_flight(0, 110) == 0);
  TraceRequest b{200, 1100, 1, {1, 2, 3}};
  auto second = cluster.serve(0, b);
  CHECK(second.hit_tokens == 1100);
  CHECK(cluster.in_flight(0, 219) == 1);  // 0 prefill + 20 ms decode
  CHECK(cluster.in_flight(0, 220) == 0);
  CHECK(cluster.hit_rate(0) == doctest::Approx(0.5));
}

TEST_CASE("load balance: max over mean") {
  CHECK(max_over_mean({}) == 0);
  CHECK(max_over_mean({0, 0}) == 0);
  CHECK(max_over_mean({5, 5, 5, 5}) == doctest::Approx(1.0));
  CHECK(max_over_mean({8, 0, 0, 0}) == doctest::Approx(4.0));
  CHECK(max_over_mean({3, 1}) == doctest::Approx(1.5));
  PolicyAccount account(2, 1000);
  account.add(0, 0, 10, 100);
  account.add(500, 0, 0, 100);
  account.add(2500, 1, 50, 100);
  account.add(2600, 0, 0, 100);
  CHECK(account.hit_tokens() == 60);
  CHECK(account.hit_ratio() == doctest::Approx(0.15));
  REQUIRE(account.windows().size() == 3);
  CHECK(account.windows()[1].prompt_tokens == 0);
  const auto b = account.balance();
  CHECK(b.overall == doctest::Approx(1.5));
  CHECK(b.window_worst == doctest::Approx(2.0));
  CHECK(b.window_mean == doctest::Approx(1.5));  // windows 0 (2.0) and 2 (1.0); 1 is empty
}

TEST_CASE("the chart is one SVG document with a line per series and gaps for empty windows") {
  const auto svg = render_hit_ratio_svg(
      "t<1>", {{"a", {0.1, 0.2, 0.3}, false}, {"b", {0.5, std::nan(""), 0.4}, true}}, 1.0);
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(svg.find("t&lt;1&gt;") != std::string::npos);
  std::size_t polylines = 0;
  for (auto at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    ++polylines;
  }
  CHECK(polylines == 3);  // a, and b split in two by the gap
  CHECK(svg.find("stroke-dasharray") != std::string::npos);
}
