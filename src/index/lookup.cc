// LookupRoute (docs/lookup.md), steps 0–11, in the order the spec lists
// them: Shard::lookup runs the steps (Impl::lookup, the spec's outline;
// run_match_steps, steps 0–11, is shared with LookupPDRoute), and
// each step is a function below it — resolve the input (step 5), the names'
// ids and the scoring the matchers share, match the chain or the exact key
// and TENANT_HOT (step 7), the policy gates (steps 8–11). Steps 12 and 13
// (AFFINITY_HINT, the load-aware ranking, the result) are in ranking.cc,
// where the answer is ranked and built. Reads only this shard plus the
// global entry count (cold start).

#include <algorithm>

#include "fingerprint/fingerprint.hh"
#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

SystemClock& fallback_clock() {
  static SystemClock clock;
  return clock;
}

}  // namespace

void Shard::lookup(const LookupQuery& query, const LookupContext& ctx, LookupResult* out) {
  impl_->last_booking = BookingRef{};
  impl_->lookup(query, ctx, out);
}

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
  Clock& clock = clock_of(ctx);
  const bool cached = names_cached(q);
  const config::CachePolicy& pol = cached ? *name_cache.policy : policies->policy_for(q.tenant_id);
  LookupState st(q, ctx, *out, clock, pol);
  const config::Ranking ranking =
      pol.ranking == config::Ranking::kServerDefault ? cfg.ranking : pol.ranking;
  st.load_aware = ranking == config::Ranking::kLoadAware;
  st.work_aware = ranking == config::Ranking::kWorkAware;
  if (!run_match_steps(st, cached)) return;
  // Step 12 (AFFINITY_HINT, or the load-aware or work-aware ranking), then 13.
  if (rank_by_load(st) || rank_by_work(st) || affinity_hint(st)) return;
  build_result(st);
}

Clock& Shard::Impl::clock_of(const LookupContext& ctx) {
  return ctx.clock != nullptr ? *ctx.clock : fallback_clock();
}

bool Shard::Impl::run_match_steps(LookupState& st, bool cached) {
  const LookupQuery& q = st.q;
  const config::CachePolicy& pol = st.pol;
  st.start = st.ctx.start_mono_us >= 0 ? st.ctx.start_mono_us : st.clock.monotonic_us();
  st.now = st.clock.wall_us();
  st.ttl = ttl_for_policy(pol);
  // Step 2: deadline = the tighter of grpc-timeout and lookupTimeoutMs.
  st.deadline = st.ctx.deadline_mono_us;
  if (pol.lookup_timeout_ms > 0)
    st.deadline = std::min(st.deadline, st.start + std::int64_t{pol.lookup_timeout_ms} * 1000);
  // Step 3: TIMEOUT has the highest precedence of all.
  if (st.past_deadline()) return finish(st, reason::kTimeout, false), false;
  // Step 4: requireChain needs a valid wire chain.
  const bool wire_chain =
      !q.block_hashes.empty() && q.block_hashes.size() == q.block_token_counts.size();
  if (pol.require_chain && !wire_chain)
    return finish(st, reason::kPolicyRequiresChain, false), false;
  // Step 5: resolve the input.
  if (!resolve_input(st)) return finish(st, reason::kNoHint, false), false;
  if (st.past_deadline()) return finish(st, reason::kTimeout, false), false;
  // Step 6: minimum-prefix gate.
  st.effective = st.exact_tokens;
  if (st.chain) {
    st.effective = 0;
    for (std::int32_t c : chain_counts) st.effective += c;
  }
  st.below_min =
      pol.minimum_prefix_tokens > 0 && st.effective < std::int64_t{pol.minimum_prefix_tokens};
  if (st.below_min && !pol.affinity_routing) return finish(st, reason::kNoHint, true), false;
  // Step 7: the index lookup.
  scored.clear();
  find_scope_of(st, cached);
  if (!cached) remember_names(st);
  if (q.tenant_id.empty() || q.model_id.empty() || q.hash_scheme.empty()) {
    st.outcome = Outcome::kNoneFinal;
  } else if (st.chain) {
    match_chain(st);
  } else {
    match_exact(st);
  }
  if (st.past_deadline()) return finish(st, reason::kTimeout, false), false;
  // Steps 8–11.
  apply_gates(st);
  return true;
}

// ---- Step 5: the input ---------------------------------------------------
// Which input a lookup keys on — the wire chain, the exact prefix_hash, or
// the fingerprint chain of token_ids (docs/fingerprint.md) — as the tenant's
// enableChainMatching decides.

bool Shard::Impl::resolve_tokens(LookupState& st) {
  const std::span<const std::uint32_t> tokens = st.q.token_ids;
  const std::int32_t bs = cfg.engine_block_size;
  if (tokens.size() > cfg.max_token_ids || bs <= 0) return false;
  const std::size_t blocks = fingerprint::wire_prefix_hashes(tokens, bs, fingerprint_buf);
  if (blocks == 0) return false;
  token_chain.clear();
  for (std::size_t i = 0; i < blocks; ++i)
    token_chain.emplace_back(fingerprint_buf.data() + i * 8, 8);
  token_counts.assign(blocks, bs);
  chain_hashes = token_chain;
  chain_counts = token_counts;
  return true;
}

bool Shard::Impl::resolve_input(LookupState& st) {
  const LookupQuery& q = st.q;
  chain_hashes = {};
  chain_counts = {};
  const bool has_arrays = !q.block_hashes.empty() || !q.block_token_counts.empty();
  if (!st.pol.enable_chain_matching) {
    if (!q.prefix_hash.empty()) {
      st.exact_hash = q.prefix_hash;
      st.exact_tokens = q.prefix_token_count;
      return true;
    }
    // prompt_text needs a tokenizer (none loaded); nothing supplied: no key.
    if (q.token_ids.empty()) return false;
    st.echo_tokens = st.ctx.token_ids_from_prompt;
    if (!resolve_tokens(st)) return false;
    // The exact key is the last block hash with the total count.
    st.exact_hash = chain_hashes.back();
    st.exact_tokens = static_cast<std::int64_t>(chain_hashes.size()) * cfg.engine_block_size;
    chain_hashes = {};
    chain_counts = {};
    return true;
  }
  if (!q.prefix_hash.empty() || has_arrays) {
    // Malformed arrays: never downgrade to prefix_hash.
    if (q.block_hashes.size() != q.block_token_counts.size()) return false;
    if (!q.block_hashes.empty()) {
      st.chain = true;
      chain_hashes = q.block_hashes;
      chain_counts = q.block_token_counts;
    } else {
      st.exact_hash = q.prefix_hash;
      st.exact_tokens = q.prefix_token_count;
    }
    return true;
  }
  if (!q.token_ids.empty()) {
    st.echo_tokens = st.ctx.token_ids_from_prompt;
    st.chain = true;
    return resolve_tokens(st);
  }
  // prompt_text: no tokenizer is loaded for any model yet → fail open.
  if (q.has_prompt_text) return false;
  st.exact_tokens = q.prefix_token_count;  // exact lookup on an empty prefix_hash
  return true;
}

// ---- Step 7: what the matchers share (docs/lookup.md "Scoring") ---------
// The ids of the query's names, the pressure factor of a replica, the
// reference score of a holder and the reason code of a miss.

bool Shard::Impl::names_cached(const LookupQuery& q) const {
  const NameCache& c = name_cache;
  if (c.domain >= domains.size() || c.policy == nullptr) return false;
  // A live domain holds references to its four ids, so names equal to the
  // query's are the ids the interners would find.
  const DomainRec& dr = domains[c.domain];
  return dr.tm != kNone && dr.k == c.k && tenants.name(c.k.tenant) == q.tenant_id &&
         models.name(c.k.model) == q.model_id && schemes.name(c.k.scheme) == q.hash_scheme &&
         adapters.name(c.k.adapter) == q.adapter_id;
}

void Shard::Impl::remember_names(const LookupState& st) {
  if (st.domain == kNone) return;
  name_cache = NameCache{st.domain, domains[st.domain].k, &st.pol};
}

void Shard::Impl::find_scope_of(LookupState& st, bool cached) const {
  const LookupQuery& q = st.q;
  st.slo_tight = q.slo_ttft_ms > 0 && q.slo_ttft_ms < cfg.slo_tight_ttft_ms;
  if (cached) {
    const DomainRec& dr = domains[name_cache.domain];
    st.tenant = dr.k.tenant;
    st.tm = dr.tm;
    st.scope = dr.scope;
    st.domain = name_cache.domain;
    st.serving = scopes[st.scope].members.size();
    return;
  }
  // Each name is hashed once (the hot path: this was seven string probes).
  st.tenant = tenants.find(q.tenant_id);
  const std::uint32_t model = models.find(q.model_id);
  const std::uint32_t scheme = schemes.find(q.hash_scheme);
  st.tm = find_tm(st.tenant, model);
  st.scope = find_scope(st.tm, scheme);
  st.serving = st.scope == kNone ? 0 : scopes[st.scope].members.size();
  st.domain = st.scope == kNone
                  ? kNone
                  : find_domain(DomainKey{st.tenant, model, scheme, adapters.find(q.adapter_id)});
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
// tokens × freshness × pressure factor × SLO bias; 0 under the load-aware and
// work-aware rankings, which price the replicas themselves (ranking.cc,
// work_ranking.cc).
double Shard::Impl::holder_score(const LookupState& st, std::uint32_t replica, std::int64_t matched,
                                 double fresh) const {
  if (st.cost_ranked()) return 0.0;
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

// ---- Step 7 for a chain ---------------------------------------------------
// The longest leading run of the request's blocks each replica holds, scored
// by matched tokens, freshness, pressure and depth-aware distinguishing power.

// Candidates: the live holders of block 0.
void Shard::Impl::start_chain_run(const LookupState& st) {
  cands.clear();
  const std::uint32_t k0 = st.domain == kNone ? kNone : find_key(st.domain, chain_hashes[0]);
  if (k0 == kNone) return;
  for (std::uint32_t e = first_entry(k0); e != kNone; e = next_entry(e)) {
    const EntryFields& er = entry(e);
    if (st.now - er.last_seen >= st.ttl) continue;
    cands.push_back(ChainCand{er.replica, 1, chain_counts[0], er.last_seen, er.tier});
  }
}

// Extends every candidate's run block by block; cands[0, active) still run.
// Per entry only what the entry decides (oldest, coldest); a run's length is
// set when it ends and its tokens after the walk.
void Shard::Impl::extend_chain_runs(std::uint32_t domain, std::int64_t now, std::int64_t ttl) {
  std::size_t active = cands.size();
  const std::uint32_t dtm = domain == kNone ? kNone : domains[domain].tm;
  // Block i+4's slot and block i+2's key record are read ahead while block i
  // is matched (each block hashed once, as the walk reaches it: a short
  // match hashes little more than it walks).
  const std::size_t n = chain_hashes.size();
  chain_keys.resize(n);
  std::uint64_t* const hashes = chain_keys.data();
  // The candidates and the spill records by raw pointer: the one-byte tier
  // stores below may alias any memory, so the vectors' own data pointers
  // would be reloaded for every entry.
  ChainCand* const cd = cands.data();
  const SpillRec* const sp_recs = spills.data();
  const GroupHasher hash_block = group_hasher(dtm);
  std::size_t hashed = 1;
  auto hash_through = [&](std::size_t j) {
    for (; hashed <= j && hashed < n; ++hashed) {
      hashes[hashed] = hash_block(chain_hashes[hashed]);
      prefetch_slot(hashes[hashed]);
    }
  };
  if (active > 0) hash_through(4);
  std::size_t i = 1;
  for (; i < n && active > 0; ++i) {
    hash_through(i + 4);
    if (i + 2 < n) prefetch_key(hashes[i + 2]);
    const std::uint32_t k = find_key_hashed(domain, hashes[i], chain_hashes[i]);
    if (k == kNone) break;
    std::size_t next = 0;
    const auto match = [&](const EntryFields& er) {
      if (now - er.last_seen >= ttl) return;
      for (std::size_t c = next; c < active; ++c) {
        if (cd[c].replica != er.replica) continue;
        ChainCand& cc = cd[c];
        cc.oldest = std::min(cc.oldest, er.last_seen);
        cc.coldest = std::max(cc.coldest, er.tier);
        // Keep continuing replicas in front; usually c == next already
        // (entries of a key are listed in the same replica order), and a
        // self-swap would stall on store-to-load forwarding.
        if (c != next) std::swap(cd[c], cd[next]);
        ++next;
        return;
      }
    };
    // The inline entry, then the spill list walked directly (no handles):
    // this loop is most of a chain lookup's time.
    const KeyRec& kr = keys[k];
    if (kr.entry.replica != kNone) match(kr.entry);
    for (std::uint32_t sp = kr.spill; sp != kNone && next < active; sp = sp_recs[sp].next)
      match(sp_recs[sp].entry);
    // The others' runs end before block i.
    for (std::size_t c = next; c < active; ++c) cd[c].run = static_cast<std::uint32_t>(i);
    active = next;
  }
  for (std::size_t c = 0; c < active; ++c) cands[c].run = static_cast<std::uint32_t>(i);
  set_run_tokens();
}

// matched = the request's tokens over each candidate's run (summed once per
// lookup, not once per entry).
void Shard::Impl::set_run_tokens() {
  run_tokens.resize(chain_counts.size() + 1);
  std::int64_t sum = 0;
  run_tokens[0] = 0;
  for (std::size_t j = 0; j < chain_counts.size(); ++j) run_tokens[j + 1] = sum += chain_counts[j];
  for (ChainCand& cc : cands) cc.matched = run_tokens[cc.run];
}

void Shard::Impl::score_chain_runs(const LookupState& st) {
  for (const ChainCand& c : cands) {
    if (c.matched <= 0) continue;
    const double fresh = freshness(st.now, c.oldest, st.ttl);
    if (fresh <= 0) continue;
    const double score = holder_score(st, c.replica, c.matched, fresh);
    scored.push_back(Scored{c.replica, score, c.matched, fresh, c.coldest, c.run, kNone});
  }
  if (st.cost_ranked()) return;
  // Depth-aware distinguishing power: m = replicas at least this deep.
  for (Scored& s : scored) {
    std::size_t m = 0;
    for (const Scored& o : scored) m += o.matched >= s.matched ? 1 : 0;
    s.score *= distinguishing_power(m, st.serving);
  }
}

void Shard::Impl::match_chain(LookupState& st) {
  start_chain_run(st);
  extend_chain_runs(st.domain, st.now, st.ttl);
  score_chain_runs(st);
  if (!scored.empty()) {
    st.outcome = Outcome::kPrefixMatch;
  } else if (cands.empty()) {
    st.outcome = classify_miss(st);
  }
}

// ---- Step 7 for one key ---------------------------------------------------
// The fresh holders of the exact key; on a miss, TENANT_HOT — the scope's
// replicas with a recent good hit rate.

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
    for (std::uint32_t e = first_entry(k); e != kNone; e = next_entry(e)) {
      const EntryFields& er = entry(e);
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

// ---- Steps 8–11: the policy gates -----------------------------------------
// What demotes a positive result: enableTenantHot, the minimum-prefix
// demotion, the matched-tokens floor and the routing floor.

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
  if (!st.cost_ranked() && st.outcome == Outcome::kPrefixMatch && pol.routing_floor_score > 0) {
    // Step 11: routing floor on the top score (the cost rankings have their own cost).
    double top = 0;
    for (const Scored& s : scored) top = std::max(top, s.score);
    if (top < pol.routing_floor_score) st.outcome = Outcome::kNone;
  }
  if (st.outcome != Outcome::kPrefixMatch && st.outcome != Outcome::kTenantHot) scored.clear();
}

}  // namespace ic::index
