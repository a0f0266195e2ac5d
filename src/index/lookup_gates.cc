// LookupRoute steps 8–11 (docs/lookup.md): the policy gates that demote a
// positive result — enableTenantHot, the minimum-prefix demotion, the
// matched-tokens floor and the routing floor.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

void Shard::Impl::apply_gates(LookupState& st) {
  const config::CachePolicy& pol = st.pol;
  // Step 8: enableTenantHot.
  if (st.outcome == Outcome::kTenantHot && !pol.enable_tenant_hot) st.outcome = Outcome::kNone;
  // Step 9: minimum-prefix demotion (affinity enabled here).
  if (st.below_min && (st.outcome == Outcome::kPrefixMatch || st.outcome == Outcome::kTenantHot))
    st.outcome = Outcome::kNone;
  if (st.outcome == Outcome::kPrefixMatch) {
    // Step 10: matched-tokens floor.
    const std::int64_t floor = pol.minimum_matched_tokens;
    std::erase_if(scored, [&](const Scored& s) { return s.matched < floor; });
    if (scored.empty()) st.outcome = Outcome::kNone;
  }
  if (!st.load_aware && st.outcome == Outcome::kPrefixMatch && pol.routing_floor_score > 0) {
    // Step 11: routing floor on the top score (the load-aware ranking has its own cost).
    double top = 0;
    for (const Scored& s : scored) top = std::max(top, s.score);
    if (top < pol.routing_floor_score) st.outcome = Outcome::kNone;
  }
  if (st.outcome != Outcome::kPrefixMatch && st.outcome != Outcome::kTenantHot) scored.clear();
}

}  // namespace ic::index
