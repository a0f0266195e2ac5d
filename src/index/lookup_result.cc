// LookupRoute step 13 (docs/lookup.md "LFU credit", step 13): credit the
// delivered PREFIX_MATCH on LFU tenants, then build the result — replicas
// by score descending then replica_id, the reason code, the echoes and the
// latency.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

void Shard::Impl::finish(LookupState& st, std::string_view code, bool echo_adapter) const {
  st.out.reason_code = code;
  if (echo_adapter) st.out.adapter_id = st.q.adapter_id;
  if (st.echo_tokens) st.out.token_ids = st.q.token_ids;
  st.out.lookup_latency_us = std::max<std::int64_t>(0, st.clock.monotonic_us() - st.start);
}

void Shard::Impl::credit_lfu(const LookupState& st) {
  for (const Scored& s : scored) {
    if (!st.chain) {
      ++entries[s.entry].access_count;
      on_order_change(s.entry);
      continue;
    }
    for (std::uint32_t i = 0; i < s.run; ++i) {
      const std::uint32_t k = find_key(st.domain, chain_hashes[i]);
      const std::uint32_t e = k == kNone ? kNone : find_entry(k, s.replica);
      if (e == kNone) break;
      ++entries[e].access_count;
      on_order_change(e);
    }
  }
}

void Shard::Impl::build_result(LookupState& st) {
  const bool match = st.outcome == Outcome::kPrefixMatch;
  if (match && st.pol.eviction == config::EvictionAlgorithm::kLfu) credit_lfu(st);
  std::sort(scored.begin(), scored.end(), [&](const Scored& a, const Scored& b) {
    const float fa = static_cast<float>(a.score), fb = static_cast<float>(b.score);
    if (fa != fb) return fa > fb;
    return replicas.name(a.replica) < replicas.name(b.replica);
  });
  if (st.load_aware && match)
    record_hint(st.scope, scored.front().replica, resolve_knobs(st.pol).load_window);
  const bool hot = st.outcome == Outcome::kTenantHot;
  for (const Scored& s : scored) {
    ReplicaScore& rs = st.out.replica_scores.emplace_back();
    rs.replica_id = replicas.name(s.replica);
    rs.score = static_cast<float>(s.score);
    rs.matched_tokens =
        static_cast<std::int32_t>(std::clamp<std::int64_t>(s.matched, INT32_MIN, INT32_MAX));
    rs.estimated_cache_hit_prob = static_cast<float>(s.prob);
    rs.tier = hot || s.tier < 1 || s.tier > 3 ? Tier{0} : s.tier;
  }
  finish(st, outcome_reason(st.outcome), true);
}

}  // namespace ic::index
