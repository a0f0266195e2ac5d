#pragma once
// LookupRoute's working state (part of Shard::Impl): the scratch vectors one
// shard reuses across lookups (no allocation per lookup once warm) and the
// state of one call as it moves through the steps of docs/lookup.md.

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy.hh"
#include "index/clock.hh"
#include "index/detail/interner.hh"
#include "index/query.hh"

namespace ic::index {
struct LookupContext;
}

namespace ic::index::detail {

// Scratch state of one chain-match candidate replica.
struct ChainCand {
  std::uint32_t replica;
  std::uint32_t run;     // blocks matched
  std::int64_t matched;  // Σ request block_token_counts over the run
  std::int64_t oldest;   // oldest last_seen over the run
  std::uint8_t coldest;  // coldest stored tier over the run
};

// One candidate replica of the load-aware ranking (ranking.cc).
struct LoadCand {
  std::uint32_t replica;
  std::uint32_t holder;  // index into Shard::Impl::scored, kNone = holds nothing usable
  double cost;           // tokens: uncached prompt tokens + load_cost_tokens × load
  std::int64_t matched;  // tokens of the matched run (0 for a cold replica)
  bool saturated;        // fresh pressure ≥ saturation_pressure
};

// One candidate replica of the work-aware ranking (work_ranking.cc).
struct WorkCand {
  std::uint32_t replica;
  std::uint32_t holder;  // index into Shard::Impl::scored, kNone = holds nothing usable
  double wait_us;        // booked work still queued + this request's uncached prefill, µs
  double queued_us;      // the booked work still queued alone, µs
  bool saturated;        // fresh pressure ≥ saturation_pressure
};

// Per-replica-id scratch of the load-aware and work-aware rankings: what one
// lookup gathered about a replica (valid when the stamp equals
// Shard::Impl::load_stamp; no clearing between lookups).
struct ReplicaScratch {
  std::uint32_t hints_stamp = 0;     // `hints` is this lookup's
  std::uint32_t pressure_stamp = 0;  // `pressure` is this lookup's (fresh stats)
  std::uint32_t cand_stamp = 0;      // already a candidate
  std::uint32_t spec_stamp = 0;      // `spec_matched` is this lookup's
  std::uint32_t work_stamp = 0;      // `work` is this lookup's
  std::uint32_t held_stamp = 0;      // `held` is this lookup's (LookupPDRoute)
  double hints = 0;
  double pressure = 0;
  std::int64_t pressure_at = 0;   // wall µs of the stats `pressure` came with
  std::int64_t spec_matched = 0;  // work-aware: tokens of its longest booked run
  std::uint32_t work = 0;         // work-aware: index of its ReplicaWork in the scope
  std::uint32_t held = 0;         // LookupPDRoute: its index in Shard::Impl::scored
};

// Answer of the load-aware ranking.
enum class LoadAnswer : std::uint8_t { kNone, kPrefixMatch, kAffinityHint };

struct Scored {
  std::uint32_t replica;
  double score;
  std::int64_t matched;
  double prob;
  std::uint8_t tier;    // stored tier; 0 = UNSPECIFIED
  std::uint32_t run;    // chain: blocks in the run; exact: 0
  std::uint32_t entry;  // exact: the matched entry
};

struct LookupScratch {
  std::vector<ChainCand> cands;
  std::vector<std::int64_t> run_tokens;  // [j] = Σ chain_counts[0, j)
  std::vector<Scored> scored;
  // The chain resolved at step 5: the query's block hashes, or token_chain.
  std::span<const std::string_view> chain_hashes;
  std::span<const std::int32_t> chain_counts;
  std::vector<std::string_view> token_chain;  // views into fingerprint_buf
  std::vector<std::int32_t> token_counts;     // engine_block_size per block
  std::string fingerprint_buf;                // wire bytes of a token_ids chain
  std::vector<LoadCand> load_cands;
  std::vector<Scored> load_scratch;
  std::vector<ReplicaScratch> replica_scratch;  // by replica id
  std::vector<WorkCand> work_cands;
  std::vector<std::uint64_t> work_keys;  // the request's key hashes (work-aware bookings)
  std::uint32_t load_stamp = 0;
  EVP_MD_CTX* sha = nullptr;  // AFFINITY_HINT digest (ranking.cc)
};

// Where a lookup stands after matching (docs/lookup.md steps 7–11).
enum class Outcome : std::uint8_t {
  kNone,       // no positive result; AFFINITY_HINT may still apply
  kNoneFinal,  // empty tenant/model/scheme: NO_HINT, no affinity
  kPrefixMatch,
  kTenantHot,
  kUnknownTenant,
  kUnknownModel,
  kUnknownHashScheme,
};

// The reason code of an outcome (AFFINITY_HINT is answered by ranking.cc).
inline std::string_view outcome_reason(Outcome o) {
  switch (o) {
    case Outcome::kPrefixMatch:
      return reason::kPrefixMatch;
    case Outcome::kTenantHot:
      return reason::kTenantHot;
    case Outcome::kUnknownTenant:
      return reason::kUnknownTenant;
    case Outcome::kUnknownModel:
      return reason::kUnknownModel;
    case Outcome::kUnknownHashScheme:
      return reason::kUnknownHashScheme;
    default:
      return reason::kNoHint;
  }
}

// One call's state, filled step by step (docs/lookup.md steps 0–13).
struct LookupState {
  LookupState(const LookupQuery& query, const LookupContext& context, LookupResult& result,
              Clock& c, const config::CachePolicy& policy)
      : q(query), ctx(context), out(result), clock(c), pol(policy) {}
  const LookupQuery& q;
  const LookupContext& ctx;
  LookupResult& out;
  Clock& clock;
  const config::CachePolicy& pol;
  std::int64_t start = 0;     // monotonic µs, latency origin (step 0)
  std::int64_t now = 0;       // wall µs (step 0)
  std::int64_t ttl = 0;       // the tenant's entry TTL, µs
  std::int64_t deadline = 0;  // monotonic µs, INT64_MAX = none (step 2)
  bool load_aware = false;    // docs/ranking.md load-aware ranking for this tenant
  bool work_aware = false;    // docs/ranking.md work-aware ranking for this tenant
  bool echo_tokens = false;   // step 5 resolved token_ids made from prompt_text
  // Step 5: the resolved input. A chain lives in LookupScratch::chain_*.
  bool chain = false;
  std::string_view exact_hash;
  std::int64_t exact_tokens = 0;
  // Step 6.
  std::int64_t effective = 0;  // the input's tokens
  bool below_min = false;      // under minimumPrefixTokens (affinity enabled)
  // Step 7: ids of the query's names (kNone when unknown).
  std::uint32_t tenant = kNone, tm = kNone, scope = kNone, domain = kNone;
  std::size_t serving = 0;  // replicas serving the scope
  bool slo_tight = false;
  Outcome outcome = Outcome::kNone;

  // A cost ranking (load-aware or work-aware) replaces the reference scores.
  bool cost_ranked() const { return load_aware || work_aware; }
  bool past_deadline() const { return deadline != INT64_MAX && clock.monotonic_us() >= deadline; }
};

// Linear freshness 1 − age/ttl clamped to [0, 1]; age ≤ 0 → 1 (docs/index.md).
inline double freshness(std::int64_t now, std::int64_t seen, std::int64_t ttl) {
  const std::int64_t age = now - seen;
  if (age <= 0) return 1.0;
  if (ttl <= 0) return 0.0;
  return std::clamp(1.0 - static_cast<double>(age) / static_cast<double>(ttl), 0.0, 1.0);
}

// Distinguishing power dp(m, t) of docs/lookup.md "Scoring".
inline double distinguishing_power(std::size_t m, std::size_t t) {
  if (t <= 1) return 1.0;
  if (m >= t) return 0.0;
  return 1.0 - static_cast<double>(m) / static_cast<double>(t);
}

}  // namespace ic::index::detail
