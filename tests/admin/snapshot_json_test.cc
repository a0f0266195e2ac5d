#include "admin/snapshot_json.hh"

#include <doctest/doctest.h>

#include <optional>
#include <vector>

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

TEST_CASE("shards merge, sort and render field for field") {
  ShardSnapshot a;
  a.replicas.push_back(ReplicaRow{.tenant = "team-b",
                                  .replica_id = "r1",
                                  .cache_memory_bytes = 0,
                                  .hit_rate = 0,
                                  .pressure = 0,
                                  .last_update_us = 0,
                                  .prefix_count = 3,
                                  .last_event_at_us = 1'700'000'000'500'000,
                                  .stats_reported = false,
                                  .t2_hit_tokens = 0,
                                  .t2_query_tokens = 0});
  a.tenants.push_back(TenantRow{.tenant_id = "team-b",
                                .index_entries = 3,
                                .hit_rate = 0,
                                .hit_rate_reported = false,
                                .memory_used = 0});
  a.total_prefixes = 3;
  ShardSnapshot b;
  b.replicas.push_back(ReplicaRow{.tenant = "team-a",
                                  .replica_id = "r2",
                                  .cache_memory_bytes = 2048,
                                  .hit_rate = static_cast<float>(0.1),
                                  .pressure = static_cast<float>(0.25),
                                  .last_update_us = 1'700'000'000'000'000,
                                  .prefix_count = 0,
                                  .last_event_at_us = 0,
                                  .stats_reported = true,
                                  .t2_hit_tokens = 7,
                                  .t2_query_tokens = 9});
  b.replicas.push_back(ReplicaRow{.tenant = "team-a",
                                  .replica_id = "r1",
                                  .cache_memory_bytes = 1024,
                                  .hit_rate = 0.5,
                                  .pressure = 0.5,
                                  .last_update_us = 1'700'000'000'000'001,
                                  .prefix_count = 12,
                                  .last_event_at_us = 1'700'000'000'000'001,
                                  .stats_reported = true,
                                  .t2_hit_tokens = 0,
                                  .t2_query_tokens = 0});
  b.replicas.push_back(ReplicaRow{.tenant = "inferencecache.io/probe", .replica_id = "p"});
  b.tenants.push_back(TenantRow{.tenant_id = "team-a",
                                .index_entries = 12,
                                .hit_rate = 0.30000000447034836,
                                .hit_rate_reported = true,
                                .memory_used = 3072});
  b.total_prefixes = 12;
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
  CHECK(merged.total_prefixes == 15);

  CHECK(render_snapshot_json(merged) ==
        R"({"replicas":[)"
        R"({"replicaId":"r1","tenant":"team-a","cacheMemoryBytes":1024,"hitRate":0.5,)"
        R"("pressure":0.5,"lastUpdate":"2023-11-14T22:13:20.000001Z","prefixCount":12,)"
        R"("lastEventAt":"2023-11-14T22:13:20.000001Z","statsReported":true,)"
        R"("t2HitTokens":0,"t2QueryTokens":0},)"
        R"({"replicaId":"r2","tenant":"team-a","cacheMemoryBytes":2048,"hitRate":0.1,)"
        R"("pressure":0.25,"lastUpdate":"2023-11-14T22:13:20Z","prefixCount":0,)"
        R"("lastEventAt":"0001-01-01T00:00:00Z","statsReported":true,)"
        R"("t2HitTokens":7,"t2QueryTokens":9},)"
        R"({"replicaId":"r1","tenant":"team-b","cacheMemoryBytes":0,"hitRate":0,)"
        R"("pressure":0,"lastUpdate":"0001-01-01T00:00:00Z","prefixCount":3,)"
        R"("lastEventAt":"2023-11-14T22:13:20.5Z","statsReported":false,)"
        R"("t2HitTokens":0,"t2QueryTokens":0}],)"
        R"("tenants":[)"
        R"({"tenantId":"team-a","indexEntries":12,"hitRate":0.3,"hitRateReported":true,)"
        R"("memoryUsed":3072},)"
        R"({"tenantId":"team-b","indexEntries":3,"hitRate":0,"hitRateReported":false,)"
        R"("memoryUsed":0}],)"
        R"("totalPrefixes":15,"hotPrefixes":0})");
}

TEST_CASE("an empty index renders empty arrays") {
  std::vector<std::optional<ShardSnapshot>> none;
  CHECK(render_snapshot_json(merge_snapshots(none)) ==
        R"({"replicas":[],"tenants":[],"totalPrefixes":0,"hotPrefixes":0})");
}

TEST_CASE("invalid UTF-8 in an id is replaced, never thrown") {
  ShardSnapshot s;
  s.tenants.push_back(TenantRow{.tenant_id = "bad\xff", .index_entries = 1});
  s.total_prefixes = 1;
  CHECK(render_snapshot_json(s) ==
        "{\"replicas\":[],\"tenants\":[{\"tenantId\":\"bad\xEF\xBF\xBD\",\"indexEntries\":1,"
        "\"hitRate\":0,\"hitRateReported\":false,\"memoryUsed\":0}],\"totalPrefixes\":1,"
        "\"hotPrefixes\":0}");
}
