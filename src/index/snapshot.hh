#pragma once
// Plain rows for the /snapshot JSON (docs/admin.md) and the views of the
// state-file export (docs/persistence.md). A shard produces rows of its own
// tenants; the admin layer merges shards, sorts, and renders JSON.

#include <cstdint>
#include <string>
#include <string_view>
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
  std::int64_t prefix_cache_hit_tokens = 0;    // the engine's own counters, cumulative tokens
  std::int64_t prefix_cache_query_tokens = 0;  // idem (ReplicaStats 8, 9)
};

// One tenant row.
struct TenantRow {
  std::string tenant_id;
  std::int64_t index_entries = 0;  // distinct prefix keys of the tenant
  double hit_rate = 0;             // mean hit_rate of its replicas with stats
  bool hit_rate_reported = false;  // at least one replica reported stats
  std::int64_t memory_used = 0;    // sum of its replicas' cache_memory_bytes
};

// One (tenant, model, hash scheme, replica) row of the work-aware ranking's
// soft state (docs/ranking.md "Predicted vs delivered"): never stored entries.
struct WorkRow {
  std::string tenant, model, hash_scheme, replica_id;
  std::int64_t open_bookings = 0;          // bookings not ended yet
  std::int64_t booked_tokens = 0;          // their uncached prompt tokens
  double prefill_tokens_per_s = 0;         // learned rate; 0 = none yet (the flag's)
  std::int64_t completion_us = 0;          // mean booking → completion, µs; 0 = none yet
  std::uint64_t hints = 0;                 // answers naming it on top
  std::uint64_t hinted_tokens = 0;         // Σ prompt tokens of those answers
  std::uint64_t predicted_hit_tokens = 0;  // Σ matched tokens those answers predicted
  double engine_hit_rate = 0;              // the replica's reported hit_rate for (tenant, model)
  bool engine_hit_rate_reported = false;   // it reported stats for (tenant, model)
  std::int64_t engine_hit_tokens = 0;      // its prefix_cache_hit_tokens (cumulative, all traffic)
  std::int64_t engine_query_tokens = 0;    // its prefix_cache_query_tokens (idem)
  std::uint64_t bookings_completed = 0;    // ended by the engine's report of the blocks
  std::uint64_t bookings_expired = 0;      // ended by the bound or overtaken
};

// One (tenant, model, replica) row of predicted vs delivered for /metrics
// (inferencecache_replica_*, docs/admin.md): a work record's hint counters
// (engine_reported false), or a held ReplicaStats' engine counters (hints 0).
// Views into the shard: valid during the visit.
struct ReplicaHitRow {
  std::string_view model, replica;
  std::uint64_t hints = 0;                 // answers naming it on top
  std::uint64_t hinted_tokens = 0;         // Σ their prompt tokens
  std::uint64_t predicted_hit_tokens = 0;  // Σ matched tokens they predicted
  std::int64_t engine_hit_tokens = 0;      // ReplicaStats.prefix_cache_hit_tokens
  std::int64_t engine_query_tokens = 0;    // ReplicaStats.prefix_cache_query_tokens
  bool engine_reported = false;            // the row is a ReplicaStats'
};

// One shard's part; total_prefixes = Σ tenants' index_entries; hot_prefixes = 0.
struct ShardSnapshot {
  std::vector<ReplicaRow> replicas;
  std::vector<TenantRow> tenants;
  std::vector<WorkRow> work;  // unsorted
  std::int64_t total_prefixes = 0;
  std::int64_t hot_prefixes = 0;
};

// One (key, replica) entry as export_entries() visits it (for the state
// file, docs/persistence.md). Views into the shard: valid during the visit.
struct EntryView {
  std::string_view tenant, model, hash_scheme, adapter;
  std::string_view prefix_hash;  // the key's hash bytes (a block hash or a prefix hash)
  std::string_view replica;
  std::int32_t token_count = 0;   // tokens the key covers (cumulative for a chain block)
  std::int64_t last_seen_us = 0;  // producer wall µs
  std::int32_t tier = 1;          // CacheTier 1..3; an unknown reported tier is 255
};

// One replica's stats for (tenant, model) as export_stats() visits them.
struct StatsView {
  std::string_view tenant, model, replica;
  std::int64_t cache_memory_bytes = 0;
  double hit_rate = 0, pressure = 0;
  std::int64_t t2_hit_tokens = 0, t2_query_tokens = 0;
  std::int64_t prefix_cache_hit_tokens = 0, prefix_cache_query_tokens = 0;
  std::int64_t stats_reported_us = 0;  // wall µs of the last stats-bearing update
  std::int64_t last_seen_us = 0;       // liveness (≥ stats_reported_us; REPLICA_UPDATED)
};

}  // namespace ic::index
