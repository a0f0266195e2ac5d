#pragma once
// Per-tenant CachePolicy and tenant quotas (docs/policy.md), parsed from the
// one JSON snapshot that replaces the whole policy state, and the immutable
// PolicySet every core reads on its hot path.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "config/pd_topology.hh"
#include "config/string_hash.hh"

namespace ic::config {

// The tenant reserved for the server's self-test (docs/contract.md): never has
// a quota, never stored.
inline constexpr std::string_view kReservedTenant = "inferencecache.io/probe";

// Cap eviction order of a tenant's entries (docs/index.md "Eviction under pressure").
enum class EvictionAlgorithm : std::uint8_t { kLru, kLfu };

// How LookupRoute ranks the replicas of a tenant (docs/ranking.md).
//   kServerDefault: the server's `--ranking` flag decides.
//   kReference:     docs/lookup.md "Scoring" (score by matched tokens, pressure factor,
//                   distinguishing power; AFFINITY_HINT by SHA-256 over the scope's replicas).
//   kLoadAware:     cost in tokens = uncached prompt tokens + load_cost_tokens × load,
//                   lowest cost first (docs/ranking.md "The load-aware ranking").
//   kWorkAware:     the estimated wait until the request's first token, from the prefill
//                   work booked on each replica and its learned rate, with the request's own
//                   prefill weighed at uncached_weight; cheapest first; every answer books
//                   its work (docs/ranking.md "Cost", "Bookings").
enum class Ranking : std::uint8_t { kServerDefault, kReference, kLoadAware, kWorkAware };

// Knobs of the work-aware ranking (server flags, docs/ranking.md "Knobs").
struct WorkAwareKnobs {
  // Prefill rate of a replica before its first completed booking, tokens/s (> 0).
  double prefill_tokens_per_s = 10'000;
  // Weight of the request's own uncached prefill against the queued work when the
  // ranking picks (0.1 … 1; docs/ranking.md "Cost"): 1 = the estimated wait itself;
  // below 1 leans toward the shorter queue. LookupPDRoute's prefill pick uses 1.
  double uncached_weight = 0.8;
  // A booking's bound before the scope has timed a completion, µs (> 0); after that,
  // 4 × the mean booking-to-completion time, and never before twice its own estimate.
  std::int64_t first_bound_us = 10'000'000;

  bool operator==(const WorkAwareKnobs&) const = default;
};

// Knobs of the load-aware ranking (policy `loadAware`, docs/ranking.md "Knobs");
// a negative value means "the server's flag".
struct LoadAwareKnobs {
  // Prefill tokens one unit of load is worth in the cost (tokens per recent hint).
  double load_cost_tokens = -1;
  // Memory of the hint count in hints: every hint of the scope decays all counts by
  // 1 − 1/load_window, so the counts sum to at most load_window.
  double load_window = -1;
  // Units of load a replica reporting pressure 1.0 adds (scaled linearly by pressure).
  double pressure_load = -1;
  // A replica whose fresh pressure is ≥ this is saturated: never the answer while
  // another candidate is not.
  double saturation_pressure = -1;

  bool operator==(const LoadAwareKnobs&) const = default;
};

// One tenant's effective policy after normalization; the defaults are the
// values for a tenant without a policy (docs/lookup.md "Defaults").
struct CachePolicy {
  // Entry TTL in µs; 0 = the server's default TTL (policy `evictionTTL` is
  // nanoseconds on the wire; ≤ 0 or absent → server default).
  std::int64_t eviction_ttl_us = 0;
  // Request-side gate in tokens; 0 disables.
  std::int32_t minimum_prefix_tokens = 0;
  // Result-side floor on a replica's matched tokens; 0 disables (negative → 0).
  std::int32_t minimum_matched_tokens = 64;
  // Post-score floor on the top score; 0 disables (negative → 0).
  double routing_floor_score = 0.1;
  // Lookup deadline in ms; ≤ 0 = none.
  std::int32_t lookup_timeout_ms = 0;
  // AFFINITY_HINT fallback enabled.
  bool affinity_routing = true;
  EvictionAlgorithm eviction = EvictionAlgorithm::kLru;
  // strategy.* gates.
  bool enable_chain_matching = true;
  bool require_chain = false;
  bool enable_tenant_hot = true;
  // `ranking` ("reference" | "load-aware" | "work-aware"; absent = the server's default).
  Ranking ranking = Ranking::kServerDefault;
  // `loadAware` knobs; absent ones are the server's flags.
  LoadAwareKnobs load_aware{};

  bool operator==(const CachePolicy&) const = default;
};

// One tenant's quota row (`tenants[]`).
struct TenantQuota {
  // Budget of distinct prefix keys; 0 admits nothing (negative input → 0).
  std::int64_t max_index_entries = 0;
  // Free-form isolation mode echoed from the JSON ("" when absent); not enforced today.
  std::string isolation_mode;
};

// The immutable policy state: share as std::shared_ptr<const PolicySet> and
// swap the pointer to change it (a lookup keeps one consistent set).
class PolicySet {
 public:
  // The default set: no policies, no quotas.
  PolicySet() = default;
  PolicySet(std::unordered_map<std::string, CachePolicy, StringHash, std::equal_to<>> policies,
            std::unordered_map<std::string, TenantQuota, StringHash, std::equal_to<>> quotas,
            std::string source_json = {}, PdTopologyMap pd_topologies = {});

  // Effective policy of `tenant` (its namespace's policy, else the defaults).
  // One hash probe, no allocation. The reference lives as long as this set.
  const CachePolicy& policy_for(std::string_view tenant) const noexcept;
  // Quota of `tenant`, nullptr when unbounded (always for the reserved tenant).
  const TenantQuota* quota_for(std::string_view tenant) const noexcept;

  std::size_t policy_count() const noexcept { return policies_.size(); }
  std::size_t quota_count() const noexcept { return quotas_.size(); }
  // Iteration for admin/reporting: every explicit policy / quota.
  const auto& policies() const noexcept { return policies_; }
  const auto& quotas() const noexcept { return quotas_; }
  // The JSON document this set was parsed from ("" for the defaults): what a
  // state file saves so a warm restart gets the last pushed policy back.
  const std::string& source_json() const noexcept { return source_json_; }
  // The prefill/decode topology named `name` (`pdTopologies[]`), nullptr when
  // none has that name. One hash probe, no allocation.
  const PdTopology* pd_topology(std::string_view name) const noexcept;
  const PdTopologyMap& pd_topologies() const noexcept { return pd_topologies_; }

  // The shared empty set (all defaults).
  static std::shared_ptr<const PolicySet> defaults();

 private:
  CachePolicy default_policy_{};
  std::unordered_map<std::string, CachePolicy, StringHash, std::equal_to<>> policies_;
  std::unordered_map<std::string, TenantQuota, StringHash, std::equal_to<>> quotas_;
  std::string source_json_;
  PdTopologyMap pd_topologies_;
};

// Outcome of parsing a policy JSON body: exactly one of `set` / `error` is set.
struct PolicyParseResult {
  std::shared_ptr<const PolicySet> set;
  // Human-readable reason for a 400 (e.g. "unknown field \"foo\" in policies[0]",
  // "unsupported version 8", "trailing data", "policies[1]: requireChain needs
  // enableChainMatching").
  std::string error;
  bool ok() const noexcept { return set != nullptr; }
};

// Parses the full policy snapshot (docs/policy.md) with nlohmann-json:
// versions 3..7 (older ones normalized), unknown fields, trailing data, wrong
// types, out-of-range integers, an unsupported version or requireChain without
// enableChainMatching are errors. Entries with an empty namespace/tenantID are
// dropped; a negative maxIndexEntries is 0; a quota for the reserved tenant is
// ignored; a later duplicate namespace/tenantID replaces an earlier one.
PolicyParseResult parse_policy_json(std::string_view body);

}  // namespace ic::config
