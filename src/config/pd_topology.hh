#pragma once
// Prefill/decode topologies (docs/pd-routing.md "Topology"): the pools a
// LookupPDRoute request names with `pd_topology_ref`. They travel inside the
// policy document (`pdTopologies`), so they are set, read back, replicated and
// persisted exactly as policies are (docs/policy.md "Two ways in").

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/string_hash.hh"

namespace ic::config {

// The KV transfer between the pools: the contract's transport_hint values.
enum class PdTransport : std::uint8_t { kMooncake, kNixl, kDirect };

// The wire spelling of `t`: "Mooncake", "NIXL" or "Direct".
std::string_view transport_name(PdTransport t);

// Topology levels, nearest first. kNone = no shared domain (or no level required).
enum class PdLevel : std::uint8_t { kHost, kRack, kZone, kNone };

// One replica of a pool and where it runs. Empty domain names match nothing.
struct PdReplica {
  std::string replica_id;
  std::string host, rack, zone;
  std::int32_t slots = 8;  // decode pool: concurrent decodes it takes (1..65,536)
};

// The nearest level `a` and `b` share: same host, else rack, else zone, else kNone.
PdLevel shared_level(const PdReplica& a, const PdReplica& b);

// One named topology (`pdTopologies[]`).
struct PdTopology {
  std::string name;
  PdTransport transport = PdTransport::kMooncake;
  std::vector<PdReplica> prefill;  // may be empty: every answer is decode-only
  std::vector<PdReplica> decode;   // at least one
  // A pair's decode replica must share this level with its prefill replica;
  // kNone = any decode replica.
  PdLevel required_level = PdLevel::kNone;
  // Below this many uncached tokens on the decode replica the decode replica
  // prefills itself (Dynamo's default, 2,048 tokens).
  std::int64_t min_uncached_tokens = 2048;
  // How long a decode booking holds a slot when no event releases it, µs.
  std::int64_t decode_hold_us = 60'000'000;
  // Slot fractions a decode replica with no shared domain costs more than
  // one on the prefill replica's host (affinity 1.0, rack 0.2, zone 0.05).
  double affinity_weight = 0.5;
};

using PdTopologyMap =
    std::unordered_map<std::string, std::shared_ptr<const PdTopology>, StringHash, std::equal_to<>>;

// Limits of one document (docs/pd-routing.md "Topology"): past them a 400.
inline constexpr std::size_t kMaxPdTopologies = 64;
inline constexpr std::size_t kMaxPdPoolReplicas = 1024;

// Parses the `pdTopologies` array of a policy document. Throws
// std::runtime_error whose what() is the 400 reason, naming the field
// (e.g. "pdTopologies[0].decode: expected at least one replica").
PdTopologyMap parse_pd_topologies(const nlohmann::json& array);

}  // namespace ic::config
