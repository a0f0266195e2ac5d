// LookupRoute: the steps of docs/lookup.md in order (0–13). Each step lives
// in the file named after it: lookup_input.cc (5), match_chain.cc and
// match_exact.cc (7), lookup_gates.cc (8–11), affinity.cc (12),
// lookup_result.cc (13). Reads only this shard plus the global entry count
// (cold start).

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

SystemClock& fallback_clock() {
  static SystemClock clock;
  return clock;
}

}  // namespace

void Shard::Impl::lookup(const LookupQuery& q, const LookupContext& ctx, LookupResult* out) {
  out->replica_scores.clear();
  out->adapter_id = {};
  out->token_ids = {};
  // Step 1: the reserved tenant never touches the index.
  if (q.tenant_id == config::kReservedTenant) {
    out->reason_code = reason::kNoHint;
    out->adapter_id = q.adapter_id;
    out->lookup_latency_us = 0;
    return;
  }
  // Step 0: the clock.
  Clock& clock = ctx.clock != nullptr ? *ctx.clock : fallback_clock();
  const config::CachePolicy& pol = policies->policy_for(q.tenant_id);
  LookupState st(q, ctx, *out, clock, pol);
  st.start = ctx.start_mono_us >= 0 ? ctx.start_mono_us : clock.monotonic_us();
  st.now = clock.wall_us();
  st.ttl = ttl_for_policy(pol);
  st.load_aware = (pol.ranking == config::Ranking::kServerDefault ? cfg.ranking : pol.ranking) ==
                  config::Ranking::kLoadAware;
  // Step 2: deadline = the tighter of grpc-timeout and lookupTimeoutMs.
  st.deadline = ctx.deadline_mono_us;
  if (pol.lookup_timeout_ms > 0)
    st.deadline = std::min(st.deadline, st.start + std::int64_t{pol.lookup_timeout_ms} * 1000);
  // Step 3: TIMEOUT has the highest precedence of all.
  if (st.past_deadline()) return finish(st, reason::kTimeout, false);
  // Step 4: requireChain needs a valid wire chain.
  const bool wire_chain =
      !q.block_hashes.empty() && q.block_hashes.size() == q.block_token_counts.size();
  if (pol.require_chain && !wire_chain) return finish(st, reason::kPolicyRequiresChain, false);
  // Step 5: resolve the input.
  if (!resolve_input(st)) return finish(st, reason::kNoHint, false);
  if (st.past_deadline()) return finish(st, reason::kTimeout, false);
  // Step 6: minimum-prefix gate.
  st.effective = st.exact_tokens;
  if (st.chain) {
    st.effective = 0;
    for (std::int32_t c : chain_counts) st.effective += c;
  }
  st.below_min =
      pol.minimum_prefix_tokens > 0 && st.effective < std::int64_t{pol.minimum_prefix_tokens};
  if (st.below_min && !pol.affinity_routing) return finish(st, reason::kNoHint, true);
  // Step 7: the index lookup.
  scored.clear();
  find_scope_of(st);
  if (q.tenant_id.empty() || q.model_id.empty() || q.hash_scheme.empty()) {
    st.outcome = Outcome::kNoneFinal;
  } else if (st.chain) {
    match_chain(st);
  } else {
    match_exact(st);
  }
  if (st.past_deadline()) return finish(st, reason::kTimeout, false);
  // Steps 8–11, then 12 (AFFINITY_HINT, or the load-aware ranking), then 13.
  apply_gates(st);
  if (rank_by_load(st) || affinity_hint(st)) return;
  build_result(st);
}

}  // namespace ic::index
