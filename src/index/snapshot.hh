#pragma once
// Plain rows for the /snapshot JSON (docs/admin.md). A shard produces rows of
// its own tenants; the admin layer merges shards, sorts, and renders JSON.

#include <cstdint>
#include <string>
#include <vector>

namespace ic::index {

// One (tenant, replica) row: the union of replicas seen in stats and in prefixes.
struct ReplicaRow {
  std::string tenant;
  std::string replica_id;
  std::int64_t cache_memory_bytes = 0;  // from the replica's latest stats (any model)
  double hit_rate = 0;                  // idem
  double pressure = 0;                  // idem
  std::int64_t last_update_us = 0;      // stats last_seen (wall µs); 0 = never (zero time)
  std::int64_t prefix_count = 0;        // prefix keys this replica holds in the tenant
  std::int64_t last_event_at_us = 0;    // newest last_seen of its entries; 0 = none
  bool stats_reported = false;          // a stats entry exists
  std::int64_t t2_hit_tokens = 0;
  std::int64_t t2_query_tokens = 0;
};

// One tenant row.
struct TenantRow {
  std::string tenant_id;
  std::int64_t index_entries = 0;  // distinct prefix keys of the tenant
  double hit_rate = 0;             // mean hit_rate of its replicas with stats
  bool hit_rate_reported = false;  // at least one replica reported stats
  std::int64_t memory_used = 0;    // sum of its replicas' cache_memory_bytes
};

// One shard's part; total_prefixes = Σ tenants' index_entries; hot_prefixes = 0.
struct ShardSnapshot {
  std::vector<ReplicaRow> replicas;
  std::vector<TenantRow> tenants;
  std::int64_t total_prefixes = 0;
  std::int64_t hot_prefixes = 0;
};

}  // namespace ic::index
