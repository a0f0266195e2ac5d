#pragma once
// The index's own LookupRoute types (docs/lookup.md): what a lookup asks and
// what it answers, free of any wire format. The service translates the gRPC
// messages at its edge (sharding/index_wire.hh).
//
// Both sides are views: a LookupQuery points into the caller's request and a
// LookupResult into the query and the shard, so a lookup copies no string.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ic::index {

// Reason codes of LookupRouteResponse.reason_code (docs/lookup.md).
namespace reason {
inline constexpr std::string_view kPrefixMatch = "PREFIX_MATCH";
inline constexpr std::string_view kTenantHot = "TENANT_HOT";
inline constexpr std::string_view kAffinityHint = "AFFINITY_HINT";
inline constexpr std::string_view kNoHint = "NO_HINT";
inline constexpr std::string_view kPolicyRequiresChain = "POLICY_REQUIRES_CHAIN";
inline constexpr std::string_view kTimeout = "TIMEOUT";
inline constexpr std::string_view kUnknownTenant = "UNKNOWN_TENANT";
inline constexpr std::string_view kUnknownModel = "UNKNOWN_MODEL";
inline constexpr std::string_view kUnknownHashScheme = "UNKNOWN_HASH_SCHEME";
}  // namespace reason

// One LookupRoute request as the index reads it (docs/lookup.md step 5 picks
// the input). Views: the caller keeps the viewed bytes alive during the call.
struct LookupQuery {
  std::string_view tenant_id, model_id, hash_scheme, adapter_id;
  std::string_view prefix_hash;         // exact key bytes; empty = none
  std::int64_t prefix_token_count = 0;  // tokens the exact key covers
  // The wire chain: block i's hash and token count. Sizes may differ (a
  // malformed request: NO_HINT, never a downgrade to prefix_hash).
  std::span<const std::string_view> block_hashes;
  std::span<const std::int32_t> block_token_counts;
  std::span<const std::uint32_t> token_ids;  // hashed with the engine block size
  bool has_prompt_text = false;              // prompt_text was sent (and not tokenized)
  std::int32_t slo_ttft_ms = 0;              // SLO hint; 0 = none
};

// Stored tier of a cache entry as answered: 1..3 (CacheTier); 0 = UNSPECIFIED.
using Tier = std::uint8_t;

// One ranked replica (LookupRouteResponse.replica_scores).
struct ReplicaScore {
  std::string_view replica_id;         // view into the shard: valid until its next call
  float score = 0;                     // 0 for AFFINITY_HINT and the load-aware ranking
  std::int32_t matched_tokens = 0;     // tokens of the matched prefix (saturated to int32)
  float estimated_cache_hit_prob = 0;  // freshness (hit rate for TENANT_HOT)
  Tier tier = 0;
};

// What a lookup answered. Fill by Shard::lookup (it clears it first); reuse
// one per core so the replica vector keeps its capacity.
struct LookupResult {
  std::string_view reason_code;              // one of index::reason
  std::vector<ReplicaScore> replica_scores;  // best first
  // Echoes of the query (docs/lookup.md step 13): the adapter partition, and
  // the token_ids when they came from prompt_text. Empty when not echoed.
  std::string_view adapter_id;
  std::span<const std::uint32_t> token_ids;
  std::int64_t lookup_latency_us = 0;  // ≥ 0, from LookupContext::start_mono_us
};

}  // namespace ic::index
