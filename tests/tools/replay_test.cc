// The replay's simulation and routing without a server (a recording fake IndexClient). The
// golden hit tokens and TTFT sums were computed independently by tests/tools/replay_golden.py.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "common/trace.hh"
#include "replay/accounting.hh"
#include "replay/chart.hh"
#include "replay/replay_run.hh"
#include "replay/router.hh"
#include "shared_trace.hh"

using namespace ic::tools;
using namespace ic::tools::replay;
namespace v1 = inferencecache::v1alpha1;

namespace {

std::vector<TraceRequest> shared_trace(std::int64_t limit) {
  return ic::tools::test::shared_trace_requests(limit);
}

// Answers `reason` naming `hinted` (NO_HINT by default) and records what the replay told the
// index, in order, in `log`: "lookup", "store replica-K", "stats replica-K", "evict replica-K".
class FakeClient final : public IndexClient {
 public:
  LookupCall lookup(const v1::LookupRouteRequest& request,
                    v1::LookupRouteResponse* response) override {
    tenants.insert(request.tenant_id());
    ++lookups;
    log.push_back("lookup");
    response->set_reason_code(reason);
    if (reason != "NO_HINT") response->add_replica_scores()->set_replica_id(hinted);
    return {true, "OK", 3};
  }
  bool report(std::size_t stream, const v1::CacheStateUpdate& update, std::string*) override {
    streams.insert(stream);
    if (update.prefixes_size() > 0) {
      ++stored_updates;
      log.push_back("store " + update.replica_id());
    }
    if (update.has_stats()) {
      ++stats_updates;
      log.push_back("stats " + update.replica_id());
    }
    if (update.hash_scheme() != "mooncake") bad_scheme = true;
    return true;
  }
  void publish(const v1::CacheEvent& event) override {
    if (event.type() == v1::CacheEvent::PREFIX_EVICTED) {
      ++evicted_events;
      log.push_back("evict " + event.replica_id());
    }
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

  std::string reason = "NO_HINT";
  std::string hinted = "replica-0";
  std::vector<std::string> log;
  std::set<std::string> tenants;
  std::set<std::size_t> streams;
  std::int64_t lookups = 0, stored_updates = 0, stats_updates = 0, evicted_events = 0,
               cleared_events = 0;
  bool bad_scheme = false, finished = false;
};

// The run on virtual time: the fake index keeps no time, and unit tests never sleep.
ReplayResult run_fake(const std::vector<TraceRequest>& trace, ReplayOptions options,
                      FakeClient& client) {
  options.clock = Clock::kVirtual;
  ProgressBar progress(static_cast<std::int64_t>(trace.size()), false);
  return run_replay(trace, options, client, progress);
}

std::uint64_t sum(const std::vector<std::uint64_t>& values) {
  std::uint64_t total = 0;
  for (auto v : values) total += v;
  return total;
}

PolicyResult const& lane(const ReplayResult& result, Policy policy) {
  for (const auto& p : result.policies) {
    if (p.policy == policy) return p;
  }
  FAIL("no lane for " << policy_name(policy));
  return result.policies.front();
}

// Three requests, two replicas at 1,000 tokens/s (1 token = 1 ms):
//   #0 at    0 ms: 1,024 tokens, blocks {1, 2}
//   #1 at  100 ms:   512 tokens, block {3}
//   #2 at  200 ms: 1,536 tokens, blocks {1, 2, 4} (shares #0's prefix)
std::vector<TraceRequest> tiny_trace() {
  return {TraceRequest{0, 1024, 10, {1, 2}}, TraceRequest{100, 512, 10, {3}},
          TraceRequest{200, 1536, 10, {1, 2, 4}}};
}

ReplayOptions tiny_options(std::vector<Policy> policies) {
  ReplayOptions options;
  options.replicas = 2;
  options.capacity_blocks = 100;
  options.prefill_rates = {1000.0};
  options.policies = std::move(policies);
  options.tenant_prefix = "tiny";
  return options;
}

}  // namespace

TEST_CASE("FIFO prefill: TTFT = queue wait + uncached prefill, the cache checked at start") {
  FakeClient client;
  const auto result = run_fake(
      tiny_trace(), tiny_options({Policy::kRoundRobin, Policy::kLeastWork, Policy::kFullKnowledge}),
      client);
  REQUIRE(result.policies.size() == 3);
  // Finish order per lane; TTFT in µs.
  // round-robin: #0 → 0 (0..1024), #1 → 1 (100..612), #2 → 0: waits for #0 until 1024, then
  // finds blocks 1, 2 stored (1,024 tokens hit) and prefills 512: ends 1536, TTFT 1336.
  const auto& rr = lane(result, Policy::kRoundRobin);
  CHECK(rr.account.ttft_us() == std::vector<std::uint64_t>{512'000, 1'024'000, 1'336'000});
  CHECK(rr.account.requests_per_replica() == std::vector<std::int64_t>{2, 1});
  CHECK(rr.account.hit_tokens() == 1024);
  CHECK(rr.account.work_ms_per_replica() == std::vector<double>{1536.0, 512.0});
  CHECK(rr.account.work_max_over_mean() == doctest::Approx(1.5));
  // least-work at 200 ms: replica 0 has 1,024 − 200 = 824 ms of #0 left, replica 1 512 − 100 =
  // 412 ms of #1: #2 goes to replica 1 (no cache knowledge), waits until 612, misses all: 2148.
  const auto& lw = lane(result, Policy::kLeastWork);
  CHECK(lw.account.ttft_us() == std::vector<std::uint64_t>{512'000, 1'024'000, 1'948'000});
  CHECK(lw.account.requests_per_replica() == std::vector<std::int64_t>{1, 2});
  CHECK(lw.account.hit_tokens() == 0);
  // full-knowledge at 200 ms: replica 0 = 824 ms wait + 512 uncached (blocks 1, 2 will be there)
  // = 1336; replica 1 = 412 + 1536 = 1948: replica 0.
  const auto& fk = lane(result, Policy::kFullKnowledge);
  CHECK(fk.account.ttft_us() == std::vector<std::uint64_t>{512'000, 1'024'000, 1'336'000});
  CHECK(fk.account.requests_per_replica() == std::vector<std::int64_t>{2, 1});
  CHECK(fk.account.hit_tokens() == 1024);
  // Nothing talks to the server but the inferencecache lane.
  CHECK(client.lookups == 0);
  CHECK(client.log.empty());
}

TEST_CASE(
    "KV events reach the server when a prefill ends; stats every interval while work remains") {
  FakeClient client;  // NO_HINT: the inferencecache lane routes by least-work
  auto options = tiny_options({Policy::kInferenceCache});
  const auto result = run_fake(tiny_trace(), options, client);
  const auto& ic = lane(result, Policy::kInferenceCache);
  CHECK(ic.account.ttft_us() == std::vector<std::uint64_t>{512'000, 1'024'000, 1'948'000});
  // Stats at 0 (before the arrival at 0), 1000 and 2000 ms of trace time; #1 stored at 612,
  // #0 at 1024, #2 at 2148 — never at routing time.
  CHECK(client.log == std::vector<std::string>{"stats replica-0", "stats replica-1", "lookup",
                                               "lookup", "lookup", "store replica-1",
                                               "stats replica-0", "stats replica-1",
                                               "store replica-0", "stats replica-0",
                                               "stats replica-1", "store replica-1"});
  CHECK(ic.reasons.at("NO_HINT") == 3);

  SUBCASE("--stats none: only the KV events") {
    FakeClient quiet;
    options.stats_interval_ms = 0;
    run_fake(tiny_trace(), options, quiet);
    CHECK(quiet.log == std::vector<std::string>{"lookup", "lookup", "lookup", "store replica-1",
                                                "store replica-0", "store replica-1"});
  }
}

TEST_CASE("the inferencecache gateway follows the top hint; least-work otherwise") {
  FakeClient client;
  client.reason = "AFFINITY_HINT";
  client.hinted = "replica-1";
  auto options = tiny_options({Policy::kInferenceCache});
  options.stats_interval_ms = 0;
  const auto result = run_fake(tiny_trace(), options, client);
  const auto& ic = lane(result, Policy::kInferenceCache);
  // All three on replica 1: #0 0..1024, #1 waits, 1024..1536, #2 waits and starts at 1536 with
  // blocks 1, 2 stored (1,024 tokens hit): 1536..2048.
  CHECK(ic.account.requests_per_replica() == std::vector<std::int64_t>{0, 3});
  CHECK(ic.account.ttft_us() == std::vector<std::uint64_t>{1'024'000, 1'436'000, 1'848'000});
  CHECK(ic.followed_hints == 3);
  CHECK(ic.ignored_hints == 0);
}

TEST_CASE("follow-fraction: a fixed per-request choice, least-work for the hints not followed") {
  // SplitMix64 of the index, top 53 bits as a fraction of 1.
  std::vector<bool> first;
  for (std::size_t i = 0; i < 8; ++i) first.push_back(follows_hint(i, 0.5));
  CHECK(first == std::vector<bool>{false, false, false, true, true, true, false, true});
  std::size_t followed = 0;
  for (std::size_t i = 0; i < 1000; ++i) followed += follows_hint(i, 0.5) ? 1 : 0;
  CHECK(followed == 497u);
  CHECK(follows_hint(3, 1.0));
  CHECK_FALSE(follows_hint(3, 0.0));

  Cluster cluster({1000.0, 1000.0}, 10);
  Router router(Policy::kInferenceCache, 2, Gateway::kFollow, 16, 0.5);
  v1::LookupRouteResponse hint;
  hint.set_reason_code("PREFIX_MATCH");
  hint.add_replica_scores()->set_replica_id("replica-1");
  const TraceRequest r{0, 512, 0, {7}};
  for (std::size_t i = 0; i < 8; ++i) {
    const Choice choice = router.choose(cluster, i, r, 0, &hint);
    CHECK(choice.followed_hint == follows_hint(i, 0.5));
    CHECK(choice.ignored_hint == !follows_hint(i, 0.5));
    CHECK(choice.replica == (follows_hint(i, 0.5) ? 1u : 0u));  // idle cluster: least-work → 0
  }
}

TEST_CASE("least-work and full-knowledge choices on a loaded cluster") {
  // Replica 0 at 1,000 tokens/s, replica 1 at 500 (half speed).
  Cluster cluster({1000.0, 500.0}, 10);
  const TraceRequest a{0, 1024, 0, {1, 2}};  // replica 0: 0..1024 ms
  const TraceRequest b{0, 200, 0, {3}};      // replica 1: 0..400 ms
  CHECK(cluster.enqueue(0, 0, a, 0) == 1024.0);
  CHECK(cluster.enqueue(1, 1, b, 0) == 400.0);
  CHECK(cluster.outstanding_prompt_ms(0, 100) == 924.0);
  CHECK(cluster.outstanding_prompt_ms(1, 100) == 300.0);
  CHECK(cluster.expected_wait_ms(0, 100) == 924.0);
  // A follow-up of `a` (1,100 tokens, blocks 1, 2, 9): blocks 1, 2 are still being prefilled on
  // replica 0, and count as cached there (they will be when the follow-up starts).
  const TraceRequest follow_up{100, 1100, 0, {1, 2, 9}};
  CHECK(cluster.expected_hit_tokens(0, follow_up) == 1024);
  CHECK(cluster.expected_hit_tokens(1, follow_up) == 0);
  Router least(Policy::kLeastWork, 2);
  Router full(Policy::kFullKnowledge, 2);
  // least-work: 924 against 300 ms → replica 1.
  CHECK(least.choose(cluster, 2, follow_up, 100, nullptr).replica == 1);
  // full-knowledge: replica 0 = 924 + 76 uncached / 1 = 1000 ms; replica 1 = 300 + 1100 / 0.5 =
  // 2500 ms → replica 0.
  CHECK(full.choose(cluster, 2, follow_up, 100, nullptr).replica == 0);
  CHECK(cluster.enqueue(0, 2, follow_up, 100) == std::nullopt);  // waits behind `a`
  std::optional<double> next;
  const Finished done = cluster.finish(0, &next);
  CHECK(done.ttft_ms() == 1024.0);
  REQUIRE(next.has_value());
  CHECK(*next == 1100.0);  // starts at 1024 with 1,024 tokens cached: 76 ms
  CHECK(cluster.finish(0, &next).ttft_ms() == 1000.0);
  CHECK_FALSE(next.has_value());
}

TEST_CASE("first 500 requests, 4 replicas x 400 blocks at 12,000 tokens/s: the golden model") {
  const auto trace = shared_trace(500);
  ReplayOptions options;
  options.replicas = 4;
  options.capacity_blocks = 400;
  options.prefill_rates = {12000.0};
  options.tenant_prefix = std::string("test");
  FakeClient client;
  const auto result = run_fake(trace, options, client);
  REQUIRE(result.policies.size() == 4);
  CHECK(result.requests_done == 500);
  // tests/tools/replay_golden.py TRACE 500 4 400 12000
  const auto& rr = lane(result, Policy::kRoundRobin);
  CHECK(rr.account.hit_tokens() == 253952);
  CHECK(sum(rr.account.ttft_us()) == 2547802086u);
  CHECK(rr.account.prompt_tokens() == 7124855);
  CHECK(rr.account.requests_per_replica() == std::vector<std::int64_t>{125, 125, 125, 125});
  const auto& lw = lane(result, Policy::kLeastWork);
  CHECK(lw.account.hit_tokens() == 253952);
  CHECK(sum(lw.account.ttft_us()) == 1624559497u);
  const auto& fk = lane(result, Policy::kFullKnowledge);
  CHECK(fk.account.hit_tokens() == 278528);
  CHECK(sum(fk.account.ttft_us()) == 1590043579u);
  CHECK(result.bound.account().hit_tokens() == 1167589);
  // Only the inferencecache lane speaks to the index, for its own tenant.
  CHECK(client.tenants == std::set<std::string>{"test-inferencecache"});
  CHECK(client.lookups == 500);
  CHECK(client.stored_updates == 500);
  CHECK(client.streams.size() == 4);
  const auto& ic = lane(result, Policy::kInferenceCache);
  CHECK(client.evicted_events == ic.evictions);
  CHECK(client.evicted_events > 0);
  CHECK(client.cleared_events == 4);
  CHECK(client.stats_updates > 0);
  CHECK_FALSE(client.bad_scheme);
  CHECK(client.finished);
  // NO_HINT everywhere: the inferencecache policy degenerates to least-work, exactly.
  CHECK(ic.account.hit_tokens() == lw.account.hit_tokens());
  CHECK(ic.account.ttft_us() == lw.account.ttft_us());
  CHECK(ic.reasons.at("NO_HINT") == 500);
}

TEST_CASE("whole trace at the defaults (8 x 2,000 blocks, 6,000 tokens/s): the golden model") {
  const auto trace = shared_trace(0);
  ReplayOptions options;
  options.policies = {Policy::kRoundRobin, Policy::kLeastWork, Policy::kFullKnowledge};
  options.clear_at_end = false;
  FakeClient client;
  const auto result = run_fake(trace, options, client);
  // tests/tools/replay_golden.py TRACE 0 8 2000
  CHECK(lane(result, Policy::kRoundRobin).account.hit_tokens() == 11691072);
  CHECK(sum(lane(result, Policy::kRoundRobin).account.ttft_us()) == 99483675308u);
  CHECK(lane(result, Policy::kLeastWork).account.hit_tokens() == 11419169);
  CHECK(sum(lane(result, Policy::kLeastWork).account.ttft_us()) == 34462139318u);
  CHECK(lane(result, Policy::kFullKnowledge).account.hit_tokens() == 31723451);
  CHECK(sum(lane(result, Policy::kFullKnowledge).account.ttft_us()) == 25287117189u);
  CHECK(lane(result, Policy::kRoundRobin).account.prompt_tokens() == 144793823);
  CHECK(result.bound.account().hit_tokens() == 54098411);
  CHECK(client.lookups == 0);
  CHECK(client.cleared_events == 0);
}

TEST_CASE("replica ids and policy names") {
  CHECK(replica_id(3) == "replica-3");
  CHECK(replica_index("replica-3", 8) == 3u);
  CHECK_FALSE(replica_index("replica-8", 8).has_value());
  CHECK_FALSE(replica_index("replica-", 8).has_value());
  CHECK_FALSE(replica_index("replica-1x", 8).has_value());
  CHECK_FALSE(replica_index("other-1", 8).has_value());
  CHECK(parse_policy("full-knowledge") == Policy::kFullKnowledge);
  CHECK(parse_policy("least-work") == Policy::kLeastWork);
  CHECK_FALSE(parse_policy("least-loaded").has_value());
  CHECK(policy_name(Policy::kInferenceCache) == "inferencecache");
}

TEST_CASE("the override gateway skips hinted replicas with --slots requests outstanding") {
  Cluster cluster({1000.0, 1000.0, 1000.0}, 10);
  const TraceRequest r{0, 100, 0, {42}};
  Router router(Policy::kInferenceCache, 3, Gateway::kOverride, 1);
  v1::LookupRouteResponse hint;
  hint.set_reason_code("PREFIX_MATCH");
  hint.add_replica_scores()->set_replica_id("replica-2");
  hint.add_replica_scores()->set_replica_id("replica-1");
  auto choice = router.choose(cluster, 0, r, 0, &hint);
  CHECK(choice.replica == 2);
  CHECK(choice.followed_hint);
  cluster.enqueue(2, 0, r, 0);  // replica 2 now has 1 outstanding = slots
  choice = router.choose(cluster, 1, r, 0, &hint);
  CHECK(choice.replica == 1);
  CHECK(choice.saturated_override);
  cluster.enqueue(1, 1, r, 0);
  choice = router.choose(cluster, 2, r, 0, &hint);
  CHECK(choice.replica == 0);  // every hinted replica saturated: least-work
  CHECK_FALSE(choice.followed_hint);
  hint.set_reason_code("TENANT_HOT");
  CHECK(router.choose(cluster, 3, r, 0, &hint).replica == 0);
  CHECK(router.choose(cluster, 3, r, 0, nullptr).replica == 0);
}

TEST_CASE("the chart: hit ratio, TTFT and load panels") {
  const auto svg = render_replay_svg("t", {{"a", {0.1, 0.2}, false}}, {{"a", {1.5, 12.0}, false}},
                                     1.0, {{"rr", {1.0, 1.0}}, {"hot", {2.0, 0.0}}});
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"1220\"", 0) ==
        0);
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(svg.find(">mean TTFT (queue wait + prefill)</text>") != std::string::npos);
  CHECK(svg.find(">12 s</text>") != std::string::npos);  // 2 s ticks up to the 12 s peak
  std::size_t polylines = 0;
  for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1))
    ++polylines;
  CHECK(polylines == 2);
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
