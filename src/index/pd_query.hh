#pragma once
// The index's own LookupPDRoute types (docs/pd-routing.md): the pair a
// prefill/decode request is answered with, free of any wire format. The
// request is a LookupQuery plus the topology's name; the service translates
// the gRPC messages at its edge (sharding/pd_wire.hh).

#include <cstdint>
#include <string_view>

#include "index/query.hh"

namespace ic::index {

// Reason codes of LookupPDRouteResponse.reason_code (docs/pd-routing.md
// "Reason codes"); the fail-open ones are LookupRoute's (index::reason):
// NO_HINT, TIMEOUT, POLICY_REQUIRES_CHAIN.
namespace pd_reason {
// A prefill replica and a decode replica; the KV moves over transport_hint.
inline constexpr std::string_view kDisaggregated = "DISAGGREGATED";
// Decode-only: the whole prompt is shorter than the topology's threshold.
inline constexpr std::string_view kDecodeOnlyShort = "DECODE_ONLY_SHORT";
// Decode-only: the decode replica holds enough of the prompt that what is
// left is shorter than the threshold.
inline constexpr std::string_view kDecodeOnlyCached = "DECODE_ONLY_CACHED";
// Decode-only: the topology has no prefill pool.
inline constexpr std::string_view kNoPrefillPool = "NO_PREFILL_POOL";
// No unsaturated decode replica shares the required domain with any prefill
// replica.
inline constexpr std::string_view kNoDecodeInDomain = "NO_DECODE_IN_DOMAIN";
// Every decode replica's reported pressure saturates it (slots booked full
// alone do not refuse: each choice is then made among the unsaturated
// replicas, docs/pd-routing.md "Model" step 2): the gateway balances.
inline constexpr std::string_view kOverloaded = "OVERLOADED";
// pd_topology_ref names no topology of the policy document in force.
inline constexpr std::string_view kUnknownTopology = "UNKNOWN_TOPOLOGY";
}  // namespace pd_reason

// What a LookupPDRoute answered. Views into the shard and the query: valid
// until the shard's next call. Empty replica ids = that leg is not named.
struct PdResult {
  std::string_view reason_code;  // one of pd_reason, or NO_HINT / TIMEOUT / POLICY_REQUIRES_CHAIN
  std::string_view prefill_replica_id;      // DISAGGREGATED only
  std::string_view decode_replica_id;       // every answer that names a pair or a decode replica
  std::string_view transport_hint;          // DISAGGREGATED only: Mooncake | NIXL | Direct
  std::string_view adapter_id;              // echo of the query's adapter when answered
  std::int32_t prefill_matched_tokens = 0;  // tokens the prefill replica holds (stored or booked)
  std::int32_t decode_matched_tokens = 0;   // tokens the decode replica holds (stored or booked)
  float prefill_score = 0;                  // T / (T + wait), µs over µs (docs/pd-routing.md)
  float decode_score = 0;                   // free fraction of the decode replica's slots
  std::int32_t uncached_tokens = 0;         // tokens the prefilling replica computes
  std::int64_t lookup_latency_us = 0;       // ≥ 0, from LookupContext::start_mono_us
};

}  // namespace ic::index
