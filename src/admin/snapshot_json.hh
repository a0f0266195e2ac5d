#pragma once
// GET /snapshot body (docs/admin.md "/snapshot JSON"): the shards' rows
// merged, sorted and rendered with nlohmann-json in the documented key order.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "index/snapshot.hh"

namespace ic::admin {

// Concatenates the shards' rows (a tenant lives on exactly one shard), drops
// the reserved tenant, sorts replicas by (tenant, replicaId) and tenants by
// tenantId bytewise, and sums totalPrefixes / hotPrefixes. Missing shards
// (std::nullopt) are skipped.
index::ShardSnapshot merge_snapshots(std::vector<std::optional<index::ShardSnapshot>>& shards);

// The JSON document, keys in spec order:
// {"replicas":[{"replicaId","tenant","cacheMemoryBytes","hitRate","pressure",
//   "lastUpdate","prefixCount","lastEventAt","statsReported","t2HitTokens",
//   "t2QueryTokens"}],"tenants":[{"tenantId","indexEntries","hitRate",
//   "hitRateReported","memoryUsed"}],"totalPrefixes","hotPrefixes"}
// Rates are reported at float precision (the wire type of ReplicaStats), so
// 0.1f reads 0.1, and 0 / 1 print without a fraction as Go's encoder does. Invalid UTF-8 in ids is
// replaced by U+FFFD.
std::string render_snapshot_json(const index::ShardSnapshot& merged);

// RFC 3339 with nanosecond precision as Go's time.RFC3339Nano prints a UTC
// time: "2026-11-30T02:29:00.123456Z", trailing fractional zeros (and a
// bare '.') dropped. `wall_us` 0 means "never" and prints the zero time
// "0001-01-01T00:00:00Z".
std::string format_rfc3339_nano(std::int64_t wall_us);

}  // namespace ic::admin
