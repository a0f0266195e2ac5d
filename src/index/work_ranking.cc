// The work-aware ranking (docs/ranking.md): LookupRoute step 12 for a tenant
// whose ranking is work-aware. Every candidate replica gets the estimated wait
// until this request's first token,
//
//   wait(r) = booked prefill work still queued on r, in µs (ReplicaWork::busy_until − now)
//           + the request's prompt tokens r does not hold (stored or booked) / rate(r)
//
// and the cheapest is the answer, at cost = queued + weight × uncached prefill
// (--uncached-weight; 1 = the wait itself); equal costs go to the rendezvous
// winner of the prompt. A miss goes through the same cost (nothing held anywhere), so
// it lands where the least work waits; with fewer than two known replicas it is
// NO_HINT (the gateway balances). The answer is booked (bookings.cc): that is
// this ranking's side effect on LookupRoute.

#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// Costs closer than this are equal (rendezvous order), µs.
constexpr double kTieUs = 1.0;
// Without stats, a scope answers NO_HINT (a probe) at most once per this many
// of its longest mean completion times, beyond the probes its found replicas
// earned (take_probe).
constexpr double kDiscoveryFactor = 4;
// Without stats, each replica the scope found since its first probe lets it
// answer this many more NO_HINT probes, hit or miss: probes whose
// replicas are found earn more, so the unknown replicas of a scope that knew
// two when its burst came are found in a few completion times, in parallel (a
// probe's request goes where the gateway's balancer sends it: to the idlest
// replica, often one the scope has not seen), not one completion time each.
constexpr std::uint32_t kProbesPerFound = 2;
// The discovery window doubles with each probe in a row that found no new
// replica, up to this (µs; or the base window when that is longer): a scope
// whose replicas are all known stops paying for probes, and still probes
// about this often when its requests would start no later elsewhere.
constexpr std::int64_t kMaxDiscoveryUs = 300'000'000;

// What the pick minimizes, µs: the queued work, plus the request's own uncached
// prefill at `own_weight` (below 1 the ranking leans toward the shorter queue).
double work_cost(const WorkCand& c, double own_weight) {
  return own_weight == 1.0 ? c.wait_us : c.queued_us + own_weight * (c.wait_us - c.queued_us);
}

}  // namespace

bool Shard::Impl::rank_by_work(LookupState& st) {
  if (!st.work_aware) return false;
  const bool rankable = st.outcome == Outcome::kPrefixMatch || st.outcome == Outcome::kNone;
  if (!rankable || st.scope == kNone || (!st.chain && st.exact_hash.empty())) return false;
  WorkState& ws = scopes[st.scope].work;
  const std::uint32_t stamp = begin_work(st, &ws);
  const double prompt = prompt_tokens(st);
  const bool any_fresh_stats =
      gather_work_candidates(st, ws, prompt, resolve_knobs(st.pol).saturation_pressure, stamp);
  const std::size_t known = work_cands.size();
  if (std::any_of(work_cands.begin(), work_cands.end(),
                  [](const WorkCand& c) { return !c.saturated; }))
    std::erase_if(work_cands, [](const WorkCand& c) { return c.saturated; });
  if (work_cands.empty()) {
    scored.clear();
    st.outcome = Outcome::kNone;
    return false;
  }
  const double own_weight = cfg.work_aware.uncached_weight;
  const WorkCand& best = pick_work(st, own_weight);
  // Without replica stats the scope knows only the replicas that hold entries
  // or bookings. When the cheapest of them would make the request wait (its
  // wait, not its cost: would this request start as soon elsewhere?) at least
  // a full prefill on an idle replica, an idle replica the scope has never
  // seen would serve it no later: a miss while the best is idle, or a queue
  // longer than the prefill the cache saves. The gateway may balance it (a
  // probe: the engine's report of its pick makes that replica known); a
  // probe's request is work the scope cannot book, so take_probe budgets them.
  const ReplicaScratch& bs = replica_scratch[best.replica];
  const double best_rate =
      bs.work_stamp == stamp ? rate_of(ws, ws.replicas[bs.work]) : prior_rate(&ws);
  const bool unknown_no_later =
      !any_fresh_stats && best.wait_us >= prompt / best_rate * 1e6 - kTieUs;
  // Without affinity routing the candidates are the prompt's holders, not the
  // scope's replicas: their count says nothing of replicas found.
  const bool probe =
      unknown_no_later && take_probe(ws, st.pol.affinity_routing ? known : 0, st.now);
  if (probe) {
    scored.clear();
    finish(st, reason::kNoHint, true);
    return true;
  }
  if (best.holder == kNone) {
    // A miss: one replica among at least two known ones, else the gateway balances.
    scored.clear();
    if (known < 2) {
      finish(st, reason::kNoHint, true);
      return true;
    }
    scored.push_back(Scored{best.replica, 0.0, 0, 0.0, 0, 0, kNone});
    book_answer(st, scored.front());
    ReplicaScore& rs = st.out.replica_scores.emplace_back();
    rs.replica_id = replicas.name(best.replica);
    finish(st, reason::kAffinityHint, true);
    return true;
  }
  // PREFIX_MATCH: the unsaturated holders, score = T / (T + cost) with T the
  // whole prompt's prefill at the knob's rate (1 = all held on an idle replica;
  // with weight 1, 0.5 = as long as a full prefill on an idle one): descending
  // score is ascending cost. build_result books the top one.
  const double full_us = prompt / cfg.work_aware.prefill_tokens_per_s * 1e6;
  load_scratch.clear();
  for (const WorkCand& c : work_cands) {
    if (c.holder == kNone) continue;
    Scored s = scored[c.holder];
    s.score = full_us > 0 ? full_us / (full_us + work_cost(c, own_weight)) : 0.0;
    load_scratch.push_back(s);
  }
  scored.swap(load_scratch);
  st.outcome = Outcome::kPrefixMatch;
  return false;
}

std::uint32_t Shard::Impl::next_stamp() {
  if (replica_scratch.size() < replicas.capacity()) replica_scratch.resize(replicas.capacity());
  if (++load_stamp == 0) {
    std::fill(replica_scratch.begin(), replica_scratch.end(), ReplicaScratch{});
    load_stamp = 1;
  }
  return load_stamp;
}

std::uint32_t Shard::Impl::begin_work(LookupState& st, WorkState* ws) {
  if (ws != nullptr) expire_work(*ws, st.now);
  const std::uint32_t stamp = next_stamp();
  work_keys.clear();
  if (ws != nullptr && ws->live > 0 && !st.below_min && booked_first(st, *ws)) {
    hash_request(st);
    match_bookings(st, *ws, stamp);
    add_booked_holders(st, stamp);
  }
  return stamp;
}

double Shard::Impl::prompt_tokens(const LookupState& st) const {
  double prompt = static_cast<double>(st.effective);
  for (const Scored& s : scored) prompt = std::max(prompt, static_cast<double>(s.matched));
  return prompt;
}

bool Shard::Impl::take_probe(WorkState& ws, std::size_t known, std::int64_t now) const {
  const auto count = static_cast<std::uint32_t>(known);
  if (ws.probe_at == INT64_MIN) {
    // The first probe: the replicas known before it earn nothing (after a
    // warm restart they are every replica there is).
    ws.probe_at = now;
    ws.known_at_probe = ws.known_found = count;
    return true;
  }
  // The replicas found since: a high-water mark that follows the count down,
  // so a replica that drops out of the scope and comes back earns as a new one.
  // (count 0: the caller cannot count the scope's replicas; nothing is earned.)
  if (count == 0) {
    // Nothing to compare.
  } else if (count < ws.known_found) {
    ws.known_found = count;
  } else if (count > ws.known_found) {
    // Replicas found since: each earns more probes (at most as many as the
    // scope knows: the budget at most doubles the known replicas per round),
    // and the window is back to its base.
    ws.probe_budget = std::min(ws.probe_budget + kProbesPerFound * (count - ws.known_found), count);
    ws.known_found = count;
    ws.fruitless_probes = 0;
  }
  if (ws.probe_budget > 0) {
    --ws.probe_budget;
  } else if (now - ws.probe_at >= discovery_window(ws)) {
    // A whole window since the last probe: that probe was fruitless unless the
    // known replicas grew since.
    if (count <= ws.known_at_probe) ++ws.fruitless_probes;
  } else {
    return false;
  }
  ws.probe_at = now;
  ws.known_at_probe = count;
  return true;
}

std::int64_t Shard::Impl::discovery_window(const WorkState& ws) const {
  // A probe's request reaches the scope as the engine's report when its
  // prefill ends: a few completion times later the probe has found its
  // replica, or found none new. Before any completion is timed, the first
  // booking bound. Each probe in a row that found nothing doubles it (at most
  // kMaxDiscoveryUs, never below the base).
  double latency = 0;
  for (const ReplicaWork& w : ws.replicas) latency = std::max(latency, w.latency_us);
  const double base = latency <= 0 ? static_cast<double>(cfg.work_aware.first_bound_us)
                                   : kDiscoveryFactor * latency;
  const double grown = std::ldexp(base, static_cast<int>(std::min(ws.fruitless_probes, 20u)));
  return static_cast<std::int64_t>(
      std::max(base, std::min(grown, static_cast<double>(kMaxDiscoveryUs))));
}

void Shard::Impl::hash_request(const LookupState& st) {
  work_keys.clear();
  const GroupHasher hash = group_hasher(st.tm);
  if (st.chain) {
    for (std::string_view h : chain_hashes) work_keys.push_back(hash(h));
  } else {
    work_keys.push_back(hash(st.exact_hash));
  }
}

bool Shard::Impl::booked_first(const LookupState& st, const WorkState& ws) const {
  // One key hash, not the whole chain's: most lookups share no first block
  // with a booking (work_keys stays empty; book_answer hashes when it books).
  if (st.chain ? chain_hashes.empty() : st.exact_hash.empty()) return false;
  const std::uint64_t first = group_hasher(st.tm)(st.chain ? chain_hashes[0] : st.exact_hash);
  for (std::uint32_t i = ws.first_of(first); i != kNone; i = ws.bookings[i].next_same) {
    if (ws.bookings[i].blocks[0] == first) return true;
  }
  return false;
}

void Shard::Impl::match_bookings(const LookupState& st, const WorkState& ws, std::uint32_t stamp) {
  const std::size_t n = work_keys.size();
  booked_slots.clear();
  if (n == 0) return;
  // Only the bookings of the first block's bucket can share a leading run.
  for (std::uint32_t i = ws.first_of(work_keys[0]); i != kNone; i = ws.bookings[i].next_same) {
    const Booking& b = ws.bookings[i];
    if (b.chain != st.chain || b.blocks[0] != work_keys[0]) continue;
    std::int64_t matched = st.exact_tokens;
    if (st.chain) {
      // A block's hash names its whole prefix, so the blocks both hold form a
      // leading run: binary search for its end.
      std::size_t lo = 0, hi = std::min(n, b.blocks.size()) - 1;
      if (b.blocks[hi] == work_keys[hi]) {
        lo = hi;
      } else {
        while (lo + 1 < hi) {
          const std::size_t mid = lo + (hi - lo) / 2;
          (b.blocks[mid] == work_keys[mid] ? lo : hi) = mid;
        }
      }
      matched = run_tokens[lo + 1];
    }
    ReplicaScratch& r = replica_scratch[b.replica];
    if (r.spec_stamp != stamp) {
      r.spec_stamp = stamp;
      r.spec_matched = 0;
    }
    r.spec_matched = std::max(r.spec_matched, matched);
    booked_slots.push_back(i);
  }
  // Slot order: add_booked_holders lists the replicas as a scan of the slots would.
  std::sort(booked_slots.begin(), booked_slots.end());
}

void Shard::Impl::add_booked_holders(LookupState& st, std::uint32_t stamp) {
  const std::int64_t floor = st.pol.minimum_matched_tokens;
  for (Scored& s : scored) {
    ReplicaScratch& r = replica_scratch[s.replica];
    if (r.spec_stamp != stamp) continue;
    if (r.spec_matched > s.matched) {
      s.matched = r.spec_matched;
      s.prob = 1.0;
    }
    r.spec_stamp = 0;  // listed
  }
  const WorkState& ws = scopes[st.scope].work;
  for (const std::uint32_t slot : booked_slots) {
    const Booking& b = ws.bookings[slot];
    ReplicaScratch& r = replica_scratch[b.replica];
    if (r.spec_stamp != stamp) continue;
    r.spec_stamp = 0;
    if (r.spec_matched <= 0 || r.spec_matched < floor) continue;
    scored.push_back(Scored{b.replica, 0.0, r.spec_matched, 1.0, 1, 0, kNone});
  }
  if (!scored.empty()) st.outcome = Outcome::kPrefixMatch;
}

bool Shard::Impl::stamp_work_state(const LookupState& st, const WorkState* ws,
                                   std::uint32_t stamp) {
  bool any_fresh_stats = false;
  if (st.tm != kNone) {
    for (const StatsRec& s : tms[st.tm].stats) {
      if (st.now - s.stats_reported >= cfg.load_stats_window_us) continue;
      replica_scratch[s.replica].pressure_stamp = stamp;
      replica_scratch[s.replica].pressure = s.pressure;
      replica_scratch[s.replica].pressure_at = s.stats_reported;
      any_fresh_stats = true;
    }
  }
  if (ws == nullptr) return any_fresh_stats;
  for (std::size_t i = 0; i < ws->replicas.size(); ++i) {
    ReplicaScratch& r = replica_scratch[ws->replicas[i].replica];
    r.work_stamp = stamp;
    r.work = static_cast<std::uint32_t>(i);
  }
  return any_fresh_stats;
}

void Shard::Impl::add_work_cand(const LookupState& st, const WorkState* ws, std::uint32_t replica,
                                std::uint32_t holder, std::int64_t matched, double fresh,
                                double prompt, double saturation, std::uint32_t stamp) {
  ReplicaScratch& r = replica_scratch[replica];
  r.cand_stamp = stamp;
  const ReplicaWork* w = r.work_stamp == stamp && ws != nullptr ? &ws->replicas[r.work] : nullptr;
  const double rate = w != nullptr ? rate_of(*ws, *w) : prior_rate(ws);
  const double queued =
      w != nullptr ? static_cast<double>(std::max<std::int64_t>(0, w->busy_until - st.now)) : 0;
  const double uncached = std::max(0.0, prompt - static_cast<double>(matched) * fresh);
  const double pressure = r.pressure_stamp == stamp ? r.pressure : 0.0;
  work_cands.push_back(
      WorkCand{replica, holder, queued + uncached / rate * 1e6, queued, pressure >= saturation});
}

bool Shard::Impl::gather_work_candidates(const LookupState& st, const WorkState& ws, double prompt,
                                         double saturation, std::uint32_t stamp) {
  const TmRec* tmr = st.tm == kNone ? nullptr : &tms[st.tm];
  const bool any_fresh_stats = stamp_work_state(st, &ws, stamp);
  auto add = [&](std::uint32_t replica, std::uint32_t holder, std::int64_t matched, double fresh) {
    add_work_cand(st, &ws, replica, holder, matched, fresh, prompt, saturation, stamp);
  };
  work_cands.clear();
  for (std::size_t i = 0; i < scored.size(); ++i)
    add(scored[i].replica, static_cast<std::uint32_t>(i), scored[i].matched, scored[i].prob);
  if (!st.pol.affinity_routing) return any_fresh_stats;
  for (const ScopeMember& m : scopes[st.scope].members) {
    if (replica_scratch[m.replica].cand_stamp != stamp) add(m.replica, kNone, 0, 0);
  }
  if (tmr != nullptr) {
    for (const StatsRec& s : tmr->stats) {
      const ReplicaScratch& r = replica_scratch[s.replica];
      if (r.pressure_stamp == stamp && r.cand_stamp != stamp) add(s.replica, kNone, 0, 0);
    }
  }
  for (const ReplicaWork& w : ws.replicas) {
    if (replica_scratch[w.replica].cand_stamp != stamp) add(w.replica, kNone, 0, 0);
  }
  return any_fresh_stats;
}

std::uint64_t Shard::Impl::prompt_seed(const LookupState& st) const {
  std::uint64_t seed = 0x1CEC0FFEEull;
  if (st.chain) {
    for (std::string_view h : chain_hashes) seed = XXH3_64bits_withSeed(h.data(), h.size(), seed);
  } else {
    seed = XXH3_64bits_withSeed(st.exact_hash.data(), st.exact_hash.size(), seed);
  }
  return seed;
}

const WorkCand& Shard::Impl::pick_work(const LookupState& st, double own_weight) const {
  const WorkCand* best = &work_cands.front();
  for (const WorkCand& c : work_cands) {
    if (work_cost(c, own_weight) < work_cost(*best, own_weight)) best = &c;
  }
  const double within = work_cost(*best, own_weight) + kTieUs;
  std::size_t tied = 0;
  for (const WorkCand& c : work_cands) tied += work_cost(c, own_weight) <= within ? 1 : 0;
  if (tied < 2) return *best;
  // Rendezvous hashing of the prompt over the tied replicas.
  const std::uint64_t seed = prompt_seed(st);
  const WorkCand* pick = nullptr;
  std::uint64_t top = 0;
  for (const WorkCand& c : work_cands) {
    if (work_cost(c, own_weight) > within) continue;
    const std::string& name = replicas.name(c.replica);
    const std::uint64_t weight = fmix64(seed ^ XXH3_64bits(name.data(), name.size()));
    if (pick == nullptr || weight > top || (weight == top && name < replicas.name(pick->replica))) {
      top = weight;
      pick = &c;
    }
  }
  return *pick;
}

void Shard::Impl::book_answer(LookupState& st, const Scored& top) {
  WorkState& ws = scopes[st.scope].work;
  ReplicaWork& w = work_of(ws, top.replica, st.now);
  ++w.hints;
  w.hinted_tokens += static_cast<std::uint64_t>(std::max<std::int64_t>(0, st.effective));
  w.predicted_hit_tokens += static_cast<std::uint64_t>(std::max<std::int64_t>(0, top.matched));
  // The tokens the engine will prefill: what the replica does not hold
  // (freshness prices the risk in the wait, it is not work).
  const std::int64_t tokens = st.effective - top.matched;
  if (tokens <= 0) return;
  if (work_keys.empty()) hash_request(st);
  Booking& b = book(ws, top.replica, st.now, tokens, st.chain, work_keys);
  b.prompt = st.effective;
  last_booking = BookingRef{st.scope, b.seq};
}

}  // namespace ic::index
