// LookupRoute steps 12 and 13 (docs/lookup.md): where the answer is ranked
// and built. Step 12: AFFINITY_HINT when nothing matched — the reference pick
// (SHA-256 of the input over the scope's replicas) — or, for a load-aware
// tenant, the load-aware ranking (docs/ranking.md), which also re-ranks
// PREFIX_MATCH by cost (the work-aware ranking is in work_ranking.cc). Step 13: credit the
// delivered PREFIX_MATCH on LFU tenants ("LFU credit"), then the result — replicas by score
// descending then replica_id, the reason code, the echoes and the latency.
//
// The load-aware ranking gives every candidate replica a cost in prompt tokens,
//
//   cost = (prompt tokens − matched tokens × freshness) + load_cost_tokens × load
//   load = decayed hints answered with the replica on top + pressure_load × pressure
//
// and the cheapest one is the answer. A holder therefore stays the answer while
// its extra load is worth fewer tokens than the prefill its cache saves; past
// that bound the request spills to a less-loaded replica, which then warms up.
// Saturated replicas (fresh pressure ≥ saturation_pressure) drop out while any
// candidate is not saturated.

#include <openssl/evp.h>
#include <xxhash.h>

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// Hint counts below this are forgotten (with a 64-hint window: ~440 hints
// without this replica), so a scope keeps no record of long-gone replicas.
constexpr double kForgetHints = 1e-3;

// The one-replica AFFINITY_HINT answer.
ReplicaScore affinity_score(std::string_view replica) {
  ReplicaScore rs;
  rs.replica_id = replica;
  return rs;
}

}  // namespace

// ---- Step 12: AFFINITY_HINT, or the load-aware ranking ----------------------

bool Shard::Impl::rank_by_load(LookupState& st) {
  if (!st.load_aware) return false;
  const bool rankable = st.outcome == Outcome::kPrefixMatch || st.outcome == Outcome::kNone;
  if (!rankable || st.scope == kNone || (!st.chain && st.exact_hash.empty())) return false;
  const config::LoadAwareKnobs knobs = resolve_knobs(st.pol);
  const LoadAnswer a = rank_load_aware(st.scope, st.tm, st.now, st.effective,
                                       st.pol.affinity_routing, knobs, st.exact_hash);
  if (a == LoadAnswer::kAffinityHint) {
    record_hint(st.scope, scored.front().replica, knobs.load_window);
    st.out.replica_scores.push_back(affinity_score(replicas.name(scored.front().replica)));
    finish(st, reason::kAffinityHint, true);
    return true;
  }
  st.outcome = a == LoadAnswer::kPrefixMatch ? Outcome::kPrefixMatch : Outcome::kNone;
  return false;
}

bool Shard::Impl::affinity_hint(LookupState& st) {
  if (st.cost_ranked() || st.outcome != Outcome::kNone || !st.pol.affinity_routing ||
      st.serving == 0 || (!st.chain && st.exact_hash.empty()))
    return false;
  EVP_DigestInit_ex(sha, EVP_sha256(), nullptr);
  if (st.chain) {
    for (std::string_view h : chain_hashes) {
      const auto n = static_cast<std::uint32_t>(h.size());
      const unsigned char len[4] = {
          static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
          static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
      EVP_DigestUpdate(sha, len, 4);
      EVP_DigestUpdate(sha, h.data(), h.size());
    }
  } else {
    EVP_DigestUpdate(sha, st.exact_hash.data(), st.exact_hash.size());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int dlen = 0;
  EVP_DigestFinal_ex(sha, digest, &dlen);
  std::uint64_t pick = 0;
  for (int i = 0; i < 8; ++i) pick = (pick << 8) | digest[i];
  const ScopeMember& m = scopes[st.scope].members[pick % st.serving];
  st.out.replica_scores.push_back(affinity_score(replicas.name(m.replica)));
  finish(st, reason::kAffinityHint, true);
  return true;
}

// ---- The load-aware ranking (docs/ranking.md) -----------------------------

void Shard::Impl::gather_load_candidates(std::uint32_t scope, std::uint32_t tm, std::int64_t now,
                                         double prompt, bool allow_cold,
                                         const config::LoadAwareKnobs& knobs) {
  const ScopeRec& sr = scopes[scope];
  const TmRec* tmr = tm == kNone ? nullptr : &tms[tm];
  // The scope's hint counts and the fresh pressures by replica id: one pass
  // each instead of a scan per candidate (stamps instead of clearing).
  if (replica_scratch.size() < replicas.capacity()) replica_scratch.resize(replicas.capacity());
  if (++load_stamp == 0) {
    std::fill(replica_scratch.begin(), replica_scratch.end(), ReplicaScratch{});
    load_stamp = 1;
  }
  const std::uint32_t stamp = load_stamp;
  for (const LoadRec& l : sr.loads) {
    replica_scratch[l.replica].hints_stamp = stamp;
    replica_scratch[l.replica].hints = l.hints;
  }
  if (tmr != nullptr) {
    for (const StatsRec& s : tmr->stats) {
      if (now - s.stats_reported >= cfg.load_stats_window_us) continue;
      replica_scratch[s.replica].pressure_stamp = stamp;
      replica_scratch[s.replica].pressure = s.pressure;
    }
  }
  auto add = [&](std::uint32_t replica, std::int64_t matched, double fresh, std::uint32_t holder) {
    ReplicaScratch& r = replica_scratch[replica];
    r.cand_stamp = stamp;
    const double hints = r.hints_stamp == stamp ? r.hints : 0.0;
    const double pressure = r.pressure_stamp == stamp ? r.pressure : 0.0;
    const double load = hints + knobs.pressure_load * pressure;
    const double uncached = prompt - static_cast<double>(matched) * fresh;
    load_cands.push_back(LoadCand{replica, holder, uncached + knobs.load_cost_tokens * load,
                                  matched, pressure >= knobs.saturation_pressure});
  };

  load_cands.clear();
  for (std::size_t i = 0; i < scored.size(); ++i)
    add(scored[i].replica, scored[i].matched, scored[i].prob, static_cast<std::uint32_t>(i));
  if (!allow_cold) return;
  for (const ScopeMember& m : sr.members) {
    if (replica_scratch[m.replica].cand_stamp != stamp) add(m.replica, 0, 0, kNone);
  }
  if (tmr == nullptr) return;
  for (const StatsRec& s : tmr->stats) {
    const ReplicaScratch& r = replica_scratch[s.replica];
    if (r.pressure_stamp == stamp && r.cand_stamp != stamp) add(s.replica, 0, 0, kNone);
  }
}

std::uint32_t Shard::Impl::affinity_among_light(const LoadCand& best,
                                                const config::LoadAwareKnobs& knobs,
                                                std::string_view exact_hash) const {
  std::uint64_t seed = 0x1CEC0FFEEull;
  if (!chain_hashes.empty()) {
    for (std::string_view h : chain_hashes) seed = XXH3_64bits_withSeed(h.data(), h.size(), seed);
  } else {
    seed = XXH3_64bits_withSeed(exact_hash.data(), exact_hash.size(), seed);
  }
  const double within = best.cost + knobs.load_cost_tokens;
  std::uint32_t pick = best.replica;
  std::uint64_t top = 0;
  for (const LoadCand& c : load_cands) {
    if (c.holder != kNone || c.cost > within) continue;
    const std::string& name = replicas.name(c.replica);
    const std::uint64_t weight = fmix64(seed ^ XXH3_64bits(name.data(), name.size()));
    if (weight > top || (weight == top && name < replicas.name(pick))) {
      top = weight;
      pick = c.replica;
    }
  }
  return pick;
}

LoadAnswer Shard::Impl::rank_load_aware(std::uint32_t scope, std::uint32_t tm, std::int64_t now,
                                        std::int64_t prompt_tokens, bool allow_cold,
                                        const config::LoadAwareKnobs& knobs,
                                        std::string_view exact_hash) {
  double prompt = static_cast<double>(prompt_tokens);
  for (const Scored& s : scored) prompt = std::max(prompt, static_cast<double>(s.matched));
  gather_load_candidates(scope, tm, now, prompt, allow_cold, knobs);
  if (std::any_of(load_cands.begin(), load_cands.end(),
                  [](const LoadCand& c) { return !c.saturated; }))
    std::erase_if(load_cands, [](const LoadCand& c) { return c.saturated; });
  if (load_cands.empty()) {
    scored.clear();
    return LoadAnswer::kNone;
  }

  // The cheapest; on equal cost the deeper match, then the smaller replica name.
  const LoadCand* best = &load_cands.front();
  for (const LoadCand& c : load_cands) {
    if (c.cost != best->cost         ? c.cost < best->cost
        : c.matched != best->matched ? c.matched > best->matched
                                     : replicas.name(c.replica) < replicas.name(best->replica))
      best = &c;
  }
  if (best->holder == kNone) {
    // AFFINITY_HINT: one cold replica, score 0.
    const std::uint32_t pick = affinity_among_light(*best, knobs, exact_hash);
    scored.clear();
    scored.push_back(Scored{pick, 0.0, 0, 0.0, 0, 0, kNone});
    return LoadAnswer::kAffinityHint;
  }
  // PREFIX_MATCH: the unsaturated holders, score = prompt / (prompt + cost)
  // (1 = all cached on an idle replica), so descending score is ascending cost.
  load_scratch.clear();
  for (const LoadCand& c : load_cands) {
    if (c.holder == kNone) continue;
    Scored s = scored[c.holder];
    s.score = prompt > 0 ? prompt / (prompt + c.cost) : 0.0;
    load_scratch.push_back(s);
  }
  scored.swap(load_scratch);
  return LoadAnswer::kPrefixMatch;
}

config::LoadAwareKnobs Shard::Impl::resolve_knobs(const config::CachePolicy& p) const {
  const config::LoadAwareKnobs& own = p.load_aware;
  const config::LoadAwareKnobs& server = cfg.load_aware;
  auto pick = [](double mine, double fallback) { return mine >= 0 ? mine : fallback; };
  return config::LoadAwareKnobs{pick(own.load_cost_tokens, server.load_cost_tokens),
                                pick(own.load_window, server.load_window),
                                pick(own.pressure_load, server.pressure_load),
                                pick(own.saturation_pressure, server.saturation_pressure)};
}

void Shard::Impl::record_hint(std::uint32_t scope, std::uint32_t replica, double window) {
  auto& loads = scopes[scope].loads;
  const double keep = 1.0 - 1.0 / std::max(1.0, window);
  bool found = false;
  for (std::size_t i = loads.size(); i-- > 0;) {
    LoadRec& l = loads[i];
    l.hints *= keep;
    if (l.replica == replica) {
      l.hints += 1.0;
      found = true;
    } else if (l.hints < kForgetHints) {
      replicas.release(l.replica);
      l = loads.back();
      loads.pop_back();
    }
  }
  if (!found) {
    replicas.ref(replica);
    loads.push_back(LoadRec{replica, 1.0});
  }
}

void Shard::Impl::clear_loads(ScopeRec& sr) {
  for (const LoadRec& l : sr.loads) replicas.release(l.replica);
  sr.loads.clear();
  sr.loads.shrink_to_fit();
}

// ---- Step 13: LFU credit and the result -------------------------------------

void Shard::Impl::finish(LookupState& st, std::string_view code, bool echo_adapter) const {
  st.out.reason_code = code;
  if (echo_adapter) st.out.adapter_id = st.q.adapter_id;
  if (st.echo_tokens) st.out.token_ids = st.q.token_ids;
  st.out.lookup_latency_us = std::max<std::int64_t>(0, st.clock.monotonic_us() - st.start);
}

void Shard::Impl::credit_lfu(const LookupState& st) {
  for (const Scored& s : scored) {
    if (!st.chain) {
      if (s.entry == kNone) continue;  // a booked (speculative) holder: no entry to credit
      ++entry(s.entry).access_count;
      on_order_change(s.entry);
      continue;
    }
    for (std::uint32_t i = 0; i < s.run; ++i) {
      const std::uint32_t k = find_key(st.domain, chain_hashes[i]);
      const std::uint32_t e = k == kNone ? kNone : find_entry(k, s.replica);
      if (e == kNone) break;
      ++entry(e).access_count;
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
  if (st.work_aware && match) book_answer(st, scored.front());
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
