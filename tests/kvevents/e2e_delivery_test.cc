// Delivery over the one HTTP/2 connection (docs/kvevents.md "Delivery"): a removal-heavy stream
// whose evictions outnumber the PublishEvent calls in flight, with stores and removals of the
// same prefix interleaved, lands exactly and in order; SIGTERM flushes the adds still waiting
// for their window and ends the ReportCacheState stream cleanly.
#include <doctest/doctest.h>

#include "e2e.hh"

namespace ic::tools::kvevents::test {
namespace {

constexpr auto kWait = std::chrono::seconds(60);
constexpr int kBatches = 40;
constexpr int kPerBatch = 16;

// Prompt j of batch k: one block, engine hash 1 + k·16 + j.
std::uint64_t hash_of(int k, int j) { return static_cast<std::uint64_t>(1 + k * kPerBatch + j); }
std::vector<std::uint32_t> prompt_of(int k, int j) {
  return tokens(static_cast<std::uint32_t>(10000 + k * kPerBatch + j));
}
// Batch k's prompt that is stored, removed and stored again within the batch.
std::uint64_t again_hash(int k) { return 100000 + static_cast<std::uint64_t>(k); }
std::vector<std::uint32_t> again_prompt(int k) {
  return tokens(static_cast<std::uint32_t>(500000 + k));
}

}  // namespace

TEST_CASE("removal-heavy stream: 664 evictions over 256 in flight land exactly, in order") {
  const std::uint16_t port = shared_server().grpc_port();
  const std::string tenant_id = tenant(55);
  auto pub = make_publisher(false);
  AdapterProcess adapter(adapter_flags(*pub, port, tenant_id, false));
  REQUIRE(pub->wait_for_subscriber(kWait));
  // Each batch stores 16 prompts and removes the previous batch's 16 (an LRU engine), and stores,
  // removes and re-stores one more prompt: its add, eviction and add again must reach the server
  // in that order, or it ends absent (eviction last) or never evicted.
  for (int k = 0; k < kBatches; ++k) {
    std::vector<Event> events;
    std::vector<std::uint64_t> previous;
    for (int j = 0; j < kPerBatch; ++j) {
      events.push_back(store({hash_of(k, j)}, prompt_of(k, j)));
      if (k > 0) previous.push_back(hash_of(k - 1, j));
    }
    if (k > 0) events.push_back(removal(previous));
    events.push_back(store({again_hash(k)}, again_prompt(k)));
    events.push_back(removal({again_hash(k)}));
    events.push_back(store({again_hash(k)}, again_prompt(k)));
    pub->publish(batch(std::move(events)));
  }
  barrier(*pub, port, tenant_id);

  const auto metric = [&](const std::string& name, const std::string& labels = "") {
    return adapter.metric("inferencecache_kvevents_" + name, labels).value_or(-1);
  };
  // Every eviction was answered before the barrier's update was written.
  CHECK(metric("server_events_total", "type=\"PREFIX_EVICTED\"") ==
        (kBatches - 1) * kPerBatch + kBatches);
  CHECK(metric("send_errors_total") == 0);
  CHECK(metric("superseded_entries_total") == 0);
  CHECK(metric("tracked_blocks") == kPerBatch + kBatches + 1);  // + the barrier's marker
  int wrong_present = 0, wrong_absent = 0;
  for (int k = 0; k < kBatches; ++k) {
    for (int j = 0; j < kPerBatch; ++j) {
      const bool present =
          lookup(port, by_tokens(tenant_id, prompt_of(k, j))).reason == "PREFIX_MATCH";
      if (k + 1 < kBatches && present) ++wrong_present;
      if (k + 1 == kBatches && !present) ++wrong_absent;
    }
    if (summary(lookup(port, by_tokens(tenant_id, again_prompt(k)))) != "PREFIX_MATCH r:16") {
      ++wrong_absent;
    }
  }
  CHECK(wrong_present == 0);
  CHECK(wrong_absent == 0);
}

TEST_CASE("SIGTERM: adds still in their window are flushed and the stream ends cleanly") {
  const std::uint16_t port = shared_server().grpc_port();
  const std::string tenant_id = tenant(56);
  auto pub = make_publisher(false);
  auto flags = adapter_flags(*pub, port, tenant_id, false);
  for (std::size_t i = 0; i + 1 < flags.size(); ++i) {
    if (flags[i] == "--window") flags[i + 1] = "10m";  // never due by itself
  }
  AdapterProcess adapter(flags);
  REQUIRE(pub->wait_for_subscriber(kWait));
  const auto a = tokens(7, 3);
  pub->publish(batch({store({1, 2, 3}, a)}));
  REQUIRE(adapter.wait_metric("inferencecache_kvevents_batches_total", "", 1, kWait));
  CHECK(adapter.metric("inferencecache_kvevents_updates_sent_total") == 0.0);
  CHECK(lookup(port, by_tokens(tenant_id, a)).reason != "PREFIX_MATCH");
  CHECK(adapter.stop() == 0);
  CHECK(summary(lookup(port, by_tokens(tenant_id, a))) == "PREFIX_MATCH r:48");
  CHECK(adapter.log().find("ReportCacheState ended with an error") == std::string::npos);
  CHECK(adapter.log().find("shutdown grace over") == std::string::npos);
}

}  // namespace ic::tools::kvevents::test
