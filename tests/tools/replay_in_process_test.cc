// The replay with its in-process index (tools/replay/in_process_index_client.hh): one index
// shard, built as the server builds its own from its flags, on the replay's trace time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "common/trace.hh"
#include "replay/in_process_index_client.hh"
#include "replay/replay_run.hh"
#include "shared_trace.hh"

using namespace ic::tools;
using namespace ic::tools::replay;
namespace v1 = inferencecache::v1alpha1;

namespace {

constexpr std::int64_t kEpoch = InProcessIndexClient::kEpochWallUs;

std::vector<TraceRequest> shared_trace(std::int64_t limit) {
  return ic::tools::test::shared_trace_requests(limit);
}

// The in-process client, recording the clock's wall time at each call the replay makes:
// "lookup@T", "store replica-K@T", "stats replica-K@T", "evict replica-K@T", "clear@T" with T in
// µs since kEpoch, and each lookup's reason code.
class Recording final : public IndexClient {
 public:
  explicit Recording(InProcessIndexClient& index) : index_(index) {}
  void at(double trace_ms) override { index_.at(trace_ms); }
  LookupCall lookup(const v1::LookupRouteRequest& request,
                    v1::LookupRouteResponse* response) override {
    const LookupCall call = index_.lookup(request, response);
    log.push_back("lookup@" + now());
    reasons.push_back(response->reason_code());
    top.push_back(response->replica_scores_size() > 0 ? response->replica_scores(0).replica_id()
                                                      : "");
    return call;
  }
  bool report(std::size_t stream, const v1::CacheStateUpdate& update, std::string* error) override {
    log.push_back((update.has_stats() ? "stats " : "store ") + update.replica_id() + "@" + now());
    return index_.report(stream, update, error);
  }
  void publish(const v1::CacheEvent& event) override {
    log.push_back((event.type() == v1::CacheEvent::ALL_CLEARED ? "clear " : "evict ") +
                  event.replica_id() + "@" + now());
    index_.publish(event);
  }
  bool finish(std::string* error) override { return index_.finish(error); }
  std::int64_t failed_events() const override { return index_.failed_events(); }

  std::vector<std::string> log;
  std::vector<std::string> reasons;
  std::vector<std::string> top;  // the first replica_scores entry's replica ("" = none)

 private:
  std::string now() const { return std::to_string(index_.wall_us() - kEpoch); }
  InProcessIndexClient& index_;
};

ReplayResult run(const std::vector<TraceRequest>& trace, ReplayOptions options,
                 IndexClient& client) {
  options.clock = Clock::kVirtual;  // what --index in-process chooses
  ProgressBar progress(static_cast<std::int64_t>(trace.size()), false);
  return run_replay(trace, options, client, progress);
}

// Three requests, two replicas at 1,000 tokens/s (1 token = 1 ms), as in replay_test.cc:
//   #0 at    0 ms: 1,024 tokens, blocks {1, 2}
//   #1 at  100 ms:   512 tokens, block {3}
//   #2 at  200 ms: 1,536 tokens, blocks {1, 2, 4} (shares #0's prefix)
std::vector<TraceRequest> tiny_trace() {
  return {TraceRequest{0, 1024, 10, {1, 2}}, TraceRequest{100, 512, 10, {3}},
          TraceRequest{200, 1536, 10, {1, 2, 4}}};
}

ReplayOptions tiny_options() {
  ReplayOptions options;
  options.replicas = 2;
  options.capacity_blocks = 100;
  options.prefill_rates = {1000.0};
  options.policies = {Policy::kInferenceCache};
  options.tenant_prefix = "tiny";
  options.stats_interval_ms = 0;
  return options;
}

}  // namespace

TEST_CASE("the in-process clock is the trace time: epoch + trace ms x 1000, never backwards") {
  InProcessIndexClient index;
  CHECK(index.wall_us() == kEpoch);
  index.at(100.5);
  CHECK(index.wall_us() == kEpoch + 100'500);
  index.at(1024.0);
  CHECK(index.wall_us() == kEpoch + 1'024'000);
  index.at(50.0);
  CHECK(index.wall_us() == kEpoch + 1'024'000);
}

TEST_CASE("tiny trace through the in-process index: every call at its trace time") {
  InProcessIndexClient index;
  Recording client(index);
  auto trace = tiny_trace();
  //   #3 at 1500 ms: 1,536 tokens, blocks {1, 2, 5}: #0's prefix, stored on replica-0 at 1024.
  trace.push_back(TraceRequest{1500, 1536, 10, {1, 2, 5}});
  auto options = tiny_options();
  options.clear_at_end = false;
  const auto result = run(trace, options, client);
  REQUIRE(result.fatal_error.empty());
  const auto& ic = result.policies.front();
  // Nothing is stored before 612 ms: the first three lookups know no replica (NO_HINT) and the
  // gateway routes them by least-work (#0 → 0, #1 → 1, #2 → 1, as replay_test.cc's fake NO_HINT
  // index). #3 finds blocks 1, 2 on replica-0 (stored at 1024 ms) and replica-0 idle.
  CHECK(client.reasons ==
        std::vector<std::string>{"NO_HINT", "NO_HINT", "NO_HINT", "PREFIX_MATCH"});
  CHECK(client.top == std::vector<std::string>{"", "", "", "replica-0"});
  CHECK(client.log == std::vector<std::string>{"lookup@0", "lookup@100000", "lookup@200000",
                                               "store replica-1@612000", "store replica-0@1024000",
                                               "lookup@1500000", "store replica-0@2012000",
                                               "store replica-1@2148000"});
  // #3: 1,024 tokens hit, 512 prefilled from 1500 to 2012.
  CHECK(ic.account.ttft_us() == std::vector<std::uint64_t>{512'000, 1'024'000, 512'000, 1'948'000});
  CHECK(ic.account.hit_tokens() == 1024);
  CHECK(ic.reasons.at("NO_HINT") == 3);
  CHECK(ic.reasons.at("PREFIX_MATCH") == 1);
  CHECK(ic.followed_hints == 1);

  // The updates carry timestamp_us 0: each entry's last_seen is the clock when it was applied.
  std::vector<std::string> entries;
  std::uint32_t cursor = 0;
  while (!index.shard().export_entries(&cursor, 1024, [&](const ic::index::EntryView& e) {
    CHECK(e.tenant == "tiny-inferencecache");
    entries.push_back(std::string(e.replica) + " " + std::to_string(e.token_count) + "@" +
                      std::to_string(e.last_seen_us - kEpoch));
  })) {
  }
  std::sort(entries.begin(), entries.end());
  CHECK(entries == std::vector<std::string>{"replica-0 1024@2012000", "replica-0 1536@2012000",
                                            "replica-0 512@2012000", "replica-1 1024@2148000",
                                            "replica-1 1536@2148000", "replica-1 512@2148000",
                                            "replica-1 512@612000"});

  SUBCASE("ALL_CLEARED at the end leaves nothing") {
    InProcessIndexClient cleared;
    options.clear_at_end = true;
    run(trace, options, cleared);
    std::uint32_t at = 0;
    std::size_t left = 0;
    while (!cleared.shard().export_entries(&at, 1024, [&](const auto&) { ++left; })) {
    }
    CHECK(left == 0);
  }
}

TEST_CASE("two in-process runs of the same replay are identical (conversation, 300 requests)") {
  const auto trace = shared_trace(300);
  ReplayOptions options;
  options.replicas = 4;
  options.capacity_blocks = 400;
  options.prefill_rates = {12000.0, 6000.0};
  options.policies = {Policy::kFullKnowledge, Policy::kInferenceCache};
  options.tenant_prefix = "det";
  InProcessIndexClient first_index;
  InProcessIndexClient second_index;
  const auto first = run(trace, options, first_index);
  const auto second = run(trace, options, second_index);
  REQUIRE(first.fatal_error.empty());
  REQUIRE(second.fatal_error.empty());
  for (std::size_t p = 0; p < 2; ++p) {
    CAPTURE(p);
    CHECK(first.policies[p].account.ttft_us() == second.policies[p].account.ttft_us());
    CHECK(first.policies[p].account.requests_per_replica() ==
          second.policies[p].account.requests_per_replica());
    CHECK(first.policies[p].reasons == second.policies[p].reasons);
  }
  // This code's figures (not an independent model): a change of the ranking moves them.
  const auto& ic = first.policies.back();
  std::uint64_t ttft_sum = 0;
  for (auto t : ic.account.ttft_us()) ttft_sum += t;
  CHECK(ic.reasons == std::map<std::string, std::int64_t>{{"NO_HINT", 10}, {"PREFIX_MATCH", 290}});
  CHECK(ic.account.hit_tokens() == 157'696);
  CHECK(ttft_sum == 1'938'711'079);
  CHECK(ic.errors.empty());
}

TEST_CASE("server flags through the server's own parser") {
  SUBCASE("a value out of range is the server's exit-2 line") {
    const auto made = InProcessIndexClient::from_server_args({"--uncached-weight=2"});
    CHECK(made.client == nullptr);
    CHECK(made.exit_code == 2);
    CHECK(made.message == "--uncached-weight: want a number in [0.1, 1], got \"2\"");
  }
  SUBCASE("--help: the server's usage, exit 0") {
    const auto made = InProcessIndexClient::from_server_args({"--help"});
    CHECK(made.client == nullptr);
    CHECK(made.exit_code == 0);
    CHECK(made.message.find("--uncached-weight") != std::string::npos);
  }
  SUBCASE("--index-ttl and --sweep-interval: the sweep runs on trace time") {
    auto made = InProcessIndexClient::from_server_args({"--index-ttl=1s", "--sweep-interval=2s"});
    REQUIRE(made.client != nullptr);
    InProcessIndexClient& index = *made.client;
    v1::CacheStateUpdate update;
    update.set_tenant_id("t");
    update.set_model_id("m");
    update.set_hash_scheme("mooncake");
    update.set_replica_id("replica-0");
    auto* prefix = update.add_prefixes();
    prefix->add_block_hashes(std::string("\0\0\0\0\0\0\0\1", 8));
    prefix->add_block_token_counts(512);
    std::string error;
    index.at(500);
    REQUIRE(index.report(0, update, &error));
    const auto count = [&index] {
      std::uint32_t at = 0;
      std::size_t n = 0;
      while (!index.shard().export_entries(&at, 1024, [&](const auto&) { ++n; })) {
      }
      return n;
    };
    index.at(1999);  // expired (older than 1 s), but the first sweep is at 2 s
    CHECK(count() == 1);
    index.at(2000);
    CHECK(count() == 0);
  }
}
