// What LookupRoute's matchers share (docs/lookup.md step 7 and "Scoring"):
// the ids of the query's names, the pressure factor of a replica, and the
// reason code of a miss.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

void Shard::Impl::find_scope_of(LookupState& st) const {
  const LookupQuery& q = st.q;
  st.tenant = tenants.find(q.tenant_id);
  st.tm = find_tm(st.tenant, models.find(q.model_id));
  st.scope = find_scope(st.tm, schemes.find(q.hash_scheme));
  st.serving = st.scope == kNone ? 0 : scopes[st.scope].members.size();
  st.domain =
      st.scope == kNone ? kNone : find_domain(q.tenant_id, q.model_id, q.hash_scheme, q.adapter_id);
  st.slo_tight = q.slo_ttft_ms > 0 && q.slo_ttft_ms < cfg.slo_tight_ttft_ms;
}

// pressure_factor = clamp(1 − w × pressure, 0, 1), from stats younger than the TTL.
double Shard::Impl::pressure_factor(const LookupState& st, std::uint32_t replica) const {
  double p = 0.0;
  if (st.tm != kNone) {
    for (const StatsRec& s : tms[st.tm].stats) {
      if (s.replica != replica) continue;
      if (st.now - s.stats_reported < st.ttl) p = s.pressure;
      break;
    }
  }
  return std::clamp(1.0 - cfg.pressure_weight * p, 0.0, 1.0);
}

// The reference score of a holder before the distinguishing power: matched
// tokens × freshness × pressure factor × SLO bias; 0 under the load-aware
// ranking, which prices the replicas itself (ranking.cc).
double Shard::Impl::holder_score(const LookupState& st, std::uint32_t replica, std::int64_t matched,
                                 double fresh) const {
  if (st.load_aware) return 0.0;
  const double slo = st.slo_tight ? 1.0 + fresh * cfg.slo_bias : 1.0;
  return static_cast<double>(matched) * fresh * pressure_factor(st, replica) * slo;
}

// The UNKNOWN_* reason of a miss; none while the index is globally empty
// (the cold-start carve-out).
Outcome Shard::Impl::classify_miss(const LookupState& st) const {
  if (globals->total_entries.load(std::memory_order_relaxed) == 0) return Outcome::kNone;
  if (st.tenant == kNone || tenant_recs[st.tenant].key_count == 0) return Outcome::kUnknownTenant;
  if (st.tm == kNone || tms[st.tm].key_count == 0) return Outcome::kUnknownModel;
  if (st.serving == 0) return Outcome::kUnknownHashScheme;
  return Outcome::kNone;
}

}  // namespace ic::index
