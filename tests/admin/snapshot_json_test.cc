#include "admin/snapshot_json.hh"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "support/golden.hh"

using namespace ic::admin;
using ic::index::ReplicaRow;
using ic::index::ShardSnapshot;
using ic::index::TenantRow;

TEST_CASE("RFC3339Nano as Go prints UTC times") {
  CHECK(format_rfc3339_nano(0) == "0001-01-01T00:00:00Z");
  CHECK(format_rfc3339_nano(1'000'000) == "1970-01-01T00:00:01Z");
  CHECK(format_rfc3339_nano(1'700'000'000'123'456) == "2023-11-14T22:13:20.123456Z");
  CHECK(format_rfc3339_nano(1'700'000'000'120'000) == "2023-11-14T22:13:20.12Z");
  CHECK(format_rfc3339_nano(1'700'000'000'000'001) == "2023-11-14T22:13:20.000001Z");
  CHECK(format_rfc3339_nano(951'782'400'000'000) == "2000-02-29T00:00:00Z");  // leap day
  CHECK(format_rfc3339_nano(-1) == "1969-12-31T23:59:59.999999Z");
}

// The shards of the index tests/integration/admin's /snapshot test fills
// through the server: both render the one golden document.
TEST_CASE("shards merge, sort and render field for field") {
  constexpr std::int64_t kT = 1'900'000'000'000'000;  // 2030-03-17T17:46:40Z
  ShardSnapshot a;
  a.replicas.push_back(ReplicaRow{
      .tenant = "team-b", .replica_id = "r3", .prefix_count = 1, .last_event_at_us = kT});
  a.tenants.push_back(TenantRow{.tenant_id = "team-b", .index_entries = 1});
  a.total_prefixes = 1;
  ShardSnapshot b;
  b.replicas.push_back(ReplicaRow{
      .tenant = "team-a", .replica_id = "r2", .prefix_count = 1, .last_event_at_us = kT + 123'456});
  b.replicas.push_back(ReplicaRow{.tenant = "team-a",
                                  .replica_id = "r1",
                                  .cache_memory_bytes = 4096,
                                  .hit_rate = 0.5,
                                  .pressure = 0.25,
                                  .last_update_us = kT,
                                  .prefix_count = 2,
                                  .last_event_at_us = kT,
                                  .stats_reported = true,
                                  .t2_hit_tokens = 7,
                                  .t2_query_tokens = 9,
                                  .prefix_cache_hit_tokens = 300,
                                  .prefix_cache_query_tokens = 1200});
  b.replicas.push_back(ReplicaRow{.tenant = "inferencecache.io/probe", .replica_id = "p"});
  b.tenants.push_back(TenantRow{.tenant_id = "team-a",
                                .index_entries = 2,
                                .hit_rate = 0.5,
                                .hit_rate_reported = true,
                                .memory_used = 4096});
  b.total_prefixes = 2;
  std::vector<std::optional<ShardSnapshot>> shards;
  shards.emplace_back(std::move(a));
  shards.emplace_back(std::nullopt);
  shards.emplace_back(std::move(b));

  const ShardSnapshot merged = merge_snapshots(shards);
  REQUIRE(merged.replicas.size() == 3);
  CHECK(merged.replicas[0].replica_id == "r1");
  CHECK(merged.replicas[0].tenant == "team-a");
  CHECK(merged.replicas[1].replica_id == "r2");
  CHECK(merged.replicas[2].tenant == "team-b");
  CHECK(merged.total_prefixes == 3);
  CHECK(render_snapshot_json(merged) == ic::itest::read_golden(IC_SNAPSHOT_GOLDEN));
}

TEST_CASE("float figures render at float precision") {
  ShardSnapshot s;
  s.replicas.push_back(ReplicaRow{.tenant = "t", .replica_id = "r", .hit_rate = 0.1f});
  s.tenants.push_back(TenantRow{.tenant_id = "t", .hit_rate = 0.30000000447034836});
  const std::string json = render_snapshot_json(s);
  CHECK(json.find(R"("replicaId":"r","tenant":"t","cacheMemoryBytes":0,"hitRate":0.1,)") !=
        std::string::npos);
  CHECK(json.find(R"({"tenantId":"t","indexEntries":0,"hitRate":0.3,)") != std::string::npos);
}

TEST_CASE("an empty index renders empty arrays") {
  std::vector<std::optional<ShardSnapshot>> none;
  CHECK(render_snapshot_json(merge_snapshots(none)) ==
        R"({"replicas":[],"tenants":[],"totalPrefixes":0,"hotPrefixes":0,"routing":[]})");
}

TEST_CASE("routing rows: merged from the shards, sorted, predicted beside delivered") {
  std::vector<std::optional<ShardSnapshot>> shards(2);
  shards[0].emplace();
  shards[1].emplace();
  shards[1]->work.push_back(ic::index::WorkRow{.tenant = "t",
                                               .model = "m",
                                               .hash_scheme = "vllm",
                                               .replica_id = "r2",
                                               .open_bookings = 2,
                                               .booked_tokens = 3072,
                                               .prefill_tokens_per_s = 6000.4,
                                               .completion_us = 410000,
                                               .hints = 40,
                                               .hinted_tokens = 81920,
                                               .predicted_hit_tokens = 20480,
                                               .engine_hit_rate = 0.24,
                                               .engine_hit_rate_reported = true,
                                               .engine_hit_tokens = 24000,
                                               .engine_query_tokens = 100000,
                                               .bookings_completed = 37,
                                               .bookings_expired = 1});
  shards[0]->work.push_back(
      ic::index::WorkRow{.tenant = "t", .model = "m", .hash_scheme = "vllm", .replica_id = "r1"});
  CHECK(render_snapshot_json(merge_snapshots(shards)) ==
        R"({"replicas":[],"tenants":[],"totalPrefixes":0,"hotPrefixes":0,"routing":[)"
        R"({"tenant":"t","modelId":"m","hashScheme":"vllm","replicaId":"r1","hints":0,)"
        R"("hintedPromptTokens":0,"predictedHitTokens":0,"predictedHitRate":0,"engineHitRate":0,)"
        R"("engineHitRateReported":false,"engineHitTokens":0,"engineQueryTokens":0,)"
        R"("openBookings":0,"bookedTokens":0,)"
        R"("prefillTokensPerSecond":0,"completionMicros":0,"bookingsCompleted":0,)"
        R"("bookingsExpired":0},)"
        R"({"tenant":"t","modelId":"m","hashScheme":"vllm","replicaId":"r2","hints":40,)"
        R"("hintedPromptTokens":81920,"predictedHitTokens":20480,"predictedHitRate":0.25,)"
        R"("engineHitRate":0.24,"engineHitRateReported":true,"engineHitTokens":24000,)"
        R"("engineQueryTokens":100000,"openBookings":2,)"
        R"("bookedTokens":3072,"prefillTokensPerSecond":6000,"completionMicros":410000,)"
        R"("bookingsCompleted":37,"bookingsExpired":1}]})");
}

TEST_CASE("invalid UTF-8 in an id is replaced, never thrown") {
  ShardSnapshot s;
  s.tenants.push_back(TenantRow{.tenant_id = "bad\xff", .index_entries = 1});
  s.total_prefixes = 1;
  CHECK(render_snapshot_json(s) ==
        "{\"replicas\":[],\"tenants\":[{\"tenantId\":\"bad\xEF\xBF\xBD\",\"indexEntries\":1,"
        "\"hitRate\":0,\"hitRateReported\":false,\"memoryUsed\":0}],\"totalPrefixes\":1,"
        "\"hotPrefixes\":0,\"routing\":[]}");
}
