#pragma once
// The index's own ingest types (docs/index.md "Ingest", "Events"): one
// replica's report of cached prefixes and stats, and one cache event, free of
// any wire format (sharding/index_wire.hh translates the gRPC messages).
// Views: the caller keeps the viewed bytes alive during the call.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "index/change.hh"

namespace ic::index {

// One reported prefix (PrefixEntry): a chain (block_hashes with their token
// counts) or the legacy exact form (prefix_hash, token_count).
struct PrefixReport {
  std::string_view prefix_hash;
  std::int32_t token_count = 0;  // tokens of the exact form
  std::span<const std::string_view> block_hashes;
  std::span<const std::int32_t> block_token_counts;  // per block, same length or malformed
  std::int32_t tier = 0;        // CacheTier as reported: 0 = T1, unknown/negative = coldest
  std::string_view adapter_id;  // empty = the update's adapter
};

// A replica's cache stats (ReplicaStats). Non-finite rates are stored as 0.
struct ReplicaStats {
  std::int64_t cache_memory_bytes = 0;
  double hit_rate = 0;  // 0..1
  double pressure = 0;  // 0..1 (≥ 1 = saturated)
  std::int64_t t2_hit_tokens = 0;
  std::int64_t t2_query_tokens = 0;
  std::int64_t prefix_cache_hit_tokens = 0;    // the engine's own, cumulative tokens
  std::int64_t prefix_cache_query_tokens = 0;  // idem
};

// One CacheStateUpdate.
struct Update {
  std::string_view tenant_id, model_id, replica_id, hash_scheme;
  std::string_view adapter_id;    // default adapter of the prefixes
  std::int64_t timestamp_us = 0;  // producer wall µs; 0 = the shard's now
  std::span<const PrefixReport> prefixes;
  std::optional<ReplicaStats> stats;
};

// CacheEvent.Type: the numbers of the change stream (index/change.hh).
using EventType = ChangeType;

// One PublishEvent.
struct Event {
  EventType type = EventType::kUnspecified;
  std::string_view tenant_id, model_id, replica_id;
  std::string_view prefix_hash;   // PREFIX_EVICTED: the key bytes
  std::string_view adapter_id;    // PREFIX_EVICTED: empty = every adapter
  std::int64_t timestamp_us = 0;  // REPLICA_UPDATED liveness; 0 = the shard's now
};

}  // namespace ic::index
