// LookupRoute step 7 for one key (docs/lookup.md step 7, "Scoring"): the
// fresh holders of the exact key; on a miss, TENANT_HOT — the scope's
// replicas with a recent good hit rate.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

void Shard::Impl::match_tenant_hot(const LookupState& st) {
  const std::int64_t window = cfg.tenant_hot_window_us;
  if (window <= 0 || st.serving == 0) return;
  const auto& members = scopes[st.scope].members;
  for (const StatsRec& s : tms[st.tm].stats) {
    const std::int64_t age = st.now - s.stats_reported;
    if (age >= window || s.hit_rate < cfg.tenant_hot_min_hit_rate) continue;
    if (std::none_of(members.begin(), members.end(),
                     [&](const ScopeMember& m) { return m.replica == s.replica; }))
      continue;
    const double recency =
        std::clamp(1.0 - static_cast<double>(age) / static_cast<double>(window), 0.0, 1.0);
    const double slo = st.slo_tight ? 1.0 + recency * cfg.slo_bias : 1.0;
    scored.push_back(Scored{s.replica, s.hit_rate * recency * pressure_factor(st, s.replica) * slo,
                            0, s.hit_rate, 0, 0, kNone});
  }
}

void Shard::Impl::match_exact(LookupState& st) {
  const std::uint32_t k = st.domain == kNone ? kNone : find_key(st.domain, st.exact_hash);
  if (k != kNone) {
    for (std::uint32_t e = keys[k].first_entry; e != kNone; e = entries[e].next_in_key) {
      const EntryRec& er = entries[e];
      const double fresh = freshness(st.now, er.last_seen, st.ttl);
      if (fresh <= 0) continue;
      const double score = holder_score(st, er.replica, er.token_count, fresh);
      scored.push_back(Scored{er.replica, score, er.token_count, fresh, er.tier, 0, e});
    }
    const double dp = distinguishing_power(scored.size(), st.serving);
    for (Scored& s : scored) s.score *= dp;
  }
  if (!scored.empty()) {
    st.outcome = Outcome::kPrefixMatch;
    return;
  }
  match_tenant_hot(st);
  st.outcome = scored.empty() ? classify_miss(st) : Outcome::kTenantHot;
}

}  // namespace ic::index
