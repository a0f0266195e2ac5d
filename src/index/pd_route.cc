// LookupPDRoute (docs/pd-routing.md): the prefill/decode pair from the same
// index and the same time model as LookupRoute. LookupRoute's steps 0–11
// (lookup.cc) find what every replica holds; then
//
//   decode-only  when a free decode replica would prefill fewer than the
//                topology's minUncachedTokens itself (the prompt is short, or
//                the replica holds the prefix): the one whose own prefill adds
//                the least delay (its wait × (1 + the decodes it stalls)),
//                unless a prefill replica's wait is shorter;
//   the prefill  the work-aware ranking's wait (work_ranking.cc add_work_cand,
//                the one cost LookupRoute uses) over the prefill pool;
//   the decode   among the free decode replicas less than half a slot more
//                loaded than the least loaded one, the load plus the affinity
//                weight × (1 − its affinity to the prefill pick's domains):
//                affinity never costs a booked slot of decode balance.
//
// A decode replica's load is the decodes its last fresh stats counted
// (pressure × slots) plus its decode bookings starting after that report
// (every open booking without stats; decode_bookings.cc), over its slots.
// Each choice is made among the free replicas it may take (slots not all
// booked, not saturated); when none is free, among the unsaturated ones (the
// decode waits for a slot wherever it goes). Only engines that all report
// saturation make the answer OVERLOADED.
// The answer books the prefilling replica's work as
// LookupRoute does, the decode replica's slot (held from the answer through
// the prefill's estimated wait and then decodeHoldMs), and the request's
// blocks on the decode replica (the KV lands there).

#include <xxhash.h>

#include <algorithm>
#include <limits>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// Decode costs closer than this are equal (then the deeper hold, then rendezvous).
constexpr double kTie = 1e-9;

// llm-d's topology affinity of a decode replica to the prefill replica:
// same host 1.0, rack 0.2, zone 0.05, none 0.
double affinity(config::PdLevel level) {
  switch (level) {
    case config::PdLevel::kHost:
      return 1.0;
    case config::PdLevel::kRack:
      return 0.2;
    case config::PdLevel::kZone:
      return 0.05;
    default:
      return 0.0;
  }
}

// Whether decode replica `d` may pair with prefill replica `p` (requiredDomain).
bool in_domain(const config::PdTopology& t, const config::PdReplica& p,
               const config::PdReplica& d) {
  return t.required_level == config::PdLevel::kNone ||
         config::shared_level(p, d) <= t.required_level;
}

// When a decode booked now starts: after the prefilling replica's estimated
// wait (µs from the answer).
std::int64_t slot_start_us(double wait_us) {
  return static_cast<std::int64_t>(std::clamp<double>(wait_us, 0, 3.6e9));
}

std::int32_t clamp32(double v) {
  return static_cast<std::int32_t>(std::clamp<double>(v, 0, INT32_MAX));
}

}  // namespace

void Shard::lookup_pd(const LookupQuery& query, std::string_view topology_ref,
                      const LookupContext& ctx, PdResult* out) {
  impl_->lookup_pd(query, topology_ref, ctx, out);
}

void Shard::Impl::resolve_pd_pools() {
  for (const auto& [name, p] : pd_pools) {
    for (std::uint32_t id : p.prefill) replicas.release(id);
    for (std::uint32_t id : p.decode) replicas.release(id);
  }
  pd_pools.clear();
  pd_decode_replicas.clear();
  for (const auto& [name, topology] : policies->pd_topologies()) {
    PdPools p;
    p.topology = topology.get();
    for (const config::PdReplica& r : topology->prefill)
      p.prefill.push_back(replicas.acquire(r.replica_id));
    for (const config::PdReplica& r : topology->decode)
      p.decode.push_back(replicas.acquire(r.replica_id));
    pd_decode_replicas.insert(pd_decode_replicas.end(), p.decode.begin(), p.decode.end());
    pd_pools.emplace(name, std::move(p));
  }
  // Decode-only: in some decode pool and in no prefill pool (a replica that
  // also prefills for a topology reports that queue too).
  std::vector<std::uint32_t> prefills;
  for (const auto& [name, p] : pd_pools)
    prefills.insert(prefills.end(), p.prefill.begin(), p.prefill.end());
  std::sort(prefills.begin(), prefills.end());
  std::sort(pd_decode_replicas.begin(), pd_decode_replicas.end());
  pd_decode_replicas.erase(std::unique(pd_decode_replicas.begin(), pd_decode_replicas.end()),
                           pd_decode_replicas.end());
  std::erase_if(pd_decode_replicas, [&](std::uint32_t r) {
    return std::binary_search(prefills.begin(), prefills.end(), r);
  });
}

bool Shard::Impl::decode_only(std::uint32_t replica) const {
  return std::binary_search(pd_decode_replicas.begin(), pd_decode_replicas.end(), replica);
}

void Shard::Impl::lookup_pd(const LookupQuery& q, std::string_view ref, const LookupContext& ctx,
                            PdResult* out) {
  *out = PdResult{};
  // The contract's default for a request that names no topology (old
  // clients) and for the reserved tenant: NO_HINT without touching the index.
  if (ref.empty() || q.tenant_id == config::kReservedTenant) {
    out->reason_code = reason::kNoHint;
    return;
  }
  Clock& clock = clock_of(ctx);
  const bool cached = names_cached(q);
  const config::CachePolicy& pol = cached ? *name_cache.policy : policies->policy_for(q.tenant_id);
  pd_steps_out.replica_scores.clear();
  LookupState st(q, ctx, pd_steps_out, clock, pol);
  // The pair is priced in time whatever ranking the tenant's LookupRoute uses.
  st.work_aware = true;
  const auto answer = [&](std::string_view code) {
    out->reason_code = code;
    out->lookup_latency_us = std::max<std::int64_t>(0, clock.monotonic_us() - st.start);
  };
  const auto pit = pd_pools.find(ref);
  if (pit == pd_pools.end()) {
    st.start = ctx.start_mono_us >= 0 ? ctx.start_mono_us : clock.monotonic_us();
    return answer(pd_reason::kUnknownTopology);
  }
  if (!run_match_steps(st, cached)) {  // TIMEOUT, POLICY_REQUIRES_CHAIN, NO_HINT
    out->reason_code = pd_steps_out.reason_code;
    out->adapter_id = pd_steps_out.adapter_id;
    out->lookup_latency_us = pd_steps_out.lookup_latency_us;
    return;
  }
  // No prompt (no chain, no prefix_hash, no token_ids): nothing to price or
  // place, so the contract default and nothing booked.
  if (!st.chain && st.exact_hash.empty()) return answer(reason::kNoHint);
  if (st.outcome != Outcome::kPrefixMatch) scored.clear();  // TENANT_HOT holds no tokens
  const PdPools& pools = pit->second;
  const config::PdTopology& topo = *pools.topology;
  WorkState* ws = st.scope != kNone ? &scopes[st.scope].work : nullptr;
  const std::uint32_t stamp = begin_work(st, ws);
  if (ws != nullptr) expire_decodes(*ws, st.now);
  const double prompt = prompt_tokens(st);
  if (prompt <= 0) return answer(reason::kNoHint);  // an exact key of 0 tokens: no prompt either
  const double saturation = resolve_knobs(pol).saturation_pressure;
  stamp_work_state(st, ws, stamp);
  for (std::size_t i = 0; i < scored.size(); ++i) {
    ReplicaScratch& r = replica_scratch[scored[i].replica];
    r.held_stamp = stamp;
    r.held = static_cast<std::uint32_t>(i);
  }
  gather_decode_candidates(st, ws, pools, prompt, saturation, stamp);
  // A replica whose slots are booked full still takes a decode when no
  // candidate has a free slot (pick_free_first): the decode waits for a slot
  // wherever it goes, and the booked decodes of prefills still queued start
  // only later. Only the engines' own saturation refuses.
  const auto usable = [](const DecodeCand& d) { return !d.saturated; };
  const auto free = [](const DecodeCand& d) { return !d.full; };
  if (std::none_of(decode_cands.begin(), decode_cands.end(), usable))
    return answer(pd_reason::kOverloaded);
  out->adapter_id = q.adapter_id;

  // Decode-only: a decode replica that would prefill fewer than the
  // threshold itself, the one adding the least delay (a free one first);
  // taken unless a prefill replica would be done sooner. One whose slots are
  // all booked is still a candidate when no such one is free, even while
  // another replica has a free slot: most of its booked decodes have not
  // started, and refusing it cost more TTFT than its slot wait in the P/D
  // replay (docs/pd-routing.md "Model" step 2).
  const auto threshold = static_cast<double>(topo.min_uncached_tokens);
  const auto local = [&](const DecodeCand& d) {
    return usable(d) && prompt - static_cast<double>(d.held) < threshold;
  };
  // Its own prefill stalls every decode running there: priced as the delay it
  // adds up, its own wait and that of each decode running now (one booked
  // but not started yet is not stalled).
  const auto own_wait = [](const DecodeCand& d) { return d.wait_us * (1.0 + d.stalled); };
  const auto load = [](const DecodeCand& d) { return d.load; };
  const DecodeCand* decode = pick_free_first(st, own_wait, local);
  std::string_view code =
      prompt < threshold ? pd_reason::kDecodeOnlyShort : pd_reason::kDecodeOnlyCached;
  if (decode == nullptr && topo.prefill.empty()) {
    decode = pick_free_first(st, load, usable);
    code = pd_reason::kNoPrefillPool;
  }
  gather_prefill_candidates(st, ws, pools, prompt, saturation, stamp, free);
  if (work_cands.empty())
    gather_prefill_candidates(st, ws, pools, prompt, saturation, stamp, usable);
  const WorkCand* best = work_cands.empty() ? nullptr : &pick_work(st, 1.0);
  if (decode != nullptr && best != nullptr && best->wait_us + 1.0 < own_wait(*decode))
    decode = nullptr;  // the pair's prefill is done sooner
  if (decode != nullptr) {
    const Scored top{decode->replica, 0.0, decode->held, 1.0, 0, 0, kNone};
    if (ws != nullptr) {
      book_answer(st, top);  // the decode replica prefills the rest itself
      book_decode(st, decode->replica, slot_start_us(decode->wait_us), topo.decode_hold_us);
    }
    out->decode_replica_id = replicas.name(decode->replica);
    out->decode_matched_tokens = clamp32(static_cast<double>(decode->held));
    out->decode_score = static_cast<float>(std::max(0.0, 1.0 - decode->load));
    out->uncached_tokens = clamp32(prompt - static_cast<double>(decode->held));
    return answer(code);
  }

  // The pair: prefill by the work-aware wait, then decode near it.
  if (best == nullptr) return answer(pd_reason::kNoDecodeInDomain);
  const config::PdReplica& prefill =
      topo.prefill[prefill_pool_index[static_cast<std::size_t>(best - work_cands.data())]];
  const auto near_prefill = [&](const DecodeCand& d) {
    return usable(d) && in_domain(topo, prefill, topo.decode[d.pool_index]);
  };
  const bool any_free =
      std::any_of(decode_cands.begin(), decode_cands.end(),
                  [&](const DecodeCand& d) { return near_prefill(d) && free(d); });
  const auto paired = [&](const DecodeCand& d) {
    return near_prefill(d) && (free(d) || !any_free);
  };
  // Balance first: affinity chooses only among the replicas within half a
  // slot of the least loaded one, so it never costs a booked slot.
  double least = std::numeric_limits<double>::infinity();
  for (const DecodeCand& d : decode_cands) {
    if (paired(d)) least = std::min(least, d.load);
  }
  const auto balanced = [&](const DecodeCand& d) {
    return paired(d) && d.load < least + 0.5 / topo.decode[d.pool_index].slots;
  };
  const auto near = [&](const DecodeCand& d) {
    const auto level = config::shared_level(prefill, topo.decode[d.pool_index]);
    return d.load + topo.affinity_weight * (1.0 - affinity(level));
  };
  decode = pick_decode(st, near, balanced);
  // gather_prefill_candidates kept only prefill replicas with a usable decode
  // replica in their domain.
  if (decode == nullptr) return answer(pd_reason::kNoDecodeInDomain);
  const std::int64_t held = best->holder != kNone ? scored[best->holder].matched : 0;
  if (ws != nullptr) {
    book_answer(st, Scored{best->replica, 0.0, held, 1.0, 0, 0, kNone});
    if (work_keys.empty() && (st.chain || !st.exact_hash.empty())) hash_request(st);
    // The KV lands on the decode replica: its next turn may stay there (one
    // speculative hold per prompt and replica is enough).
    if (!holds_booking(*ws, decode->replica, st.chain))
      book(*ws, decode->replica, st.now, 0, st.chain, work_keys);
    book_decode(st, decode->replica, slot_start_us(best->wait_us), topo.decode_hold_us);
  }
  const double full_us = prompt / cfg.work_aware.prefill_tokens_per_s * 1e6;
  out->prefill_replica_id = replicas.name(best->replica);
  out->decode_replica_id = replicas.name(decode->replica);
  out->transport_hint = config::transport_name(topo.transport);
  out->prefill_matched_tokens = clamp32(static_cast<double>(held));
  out->decode_matched_tokens = clamp32(static_cast<double>(decode->held));
  out->prefill_score = static_cast<float>(full_us > 0 ? full_us / (full_us + best->wait_us) : 0.0);
  out->decode_score = static_cast<float>(std::max(0.0, 1.0 - decode->load));
  out->uncached_tokens = clamp32(prompt - static_cast<double>(held));
  answer(pd_reason::kDisaggregated);
}

void Shard::Impl::gather_decode_candidates(const LookupState& st, const WorkState* ws,
                                           const PdPools& pools, double prompt, double saturation,
                                           std::uint32_t stamp) {
  decode_cands.clear();
  work_cands.clear();
  for (std::size_t i = 0; i < pools.decode.size(); ++i) {
    const std::uint32_t replica = pools.decode[i];
    const ReplicaScratch& r = replica_scratch[replica];
    const std::uint32_t holder = r.held_stamp == stamp ? r.held : kNone;
    const std::int64_t held =
        holder != kNone
            ? std::min<std::int64_t>(scored[holder].matched, static_cast<std::int64_t>(prompt))
            : 0;
    // Its own prefill of what it does not hold, priced as LookupRoute prices it.
    add_work_cand(st, ws, replica, holder, held, holder != kNone ? scored[holder].prob : 0.0,
                  prompt, saturation, stamp);
    const double wait_us = work_cands.back().wait_us;
    work_cands.pop_back();
    const std::int64_t reported_at = r.pressure_stamp == stamp ? r.pressure_at : INT64_MIN;
    decode_cands.push_back(DecodeCand{static_cast<std::uint32_t>(i), replica, held, 0.0, wait_us,
                                      0.0, false, false, reported_at, 0, 0, 0.0});
  }
  // Its decodes: what its last fresh report counted running (pressure ×
  // slots), plus the decodes booked here that report could not count (their
  // estimated start is after it): a burst of answers between two reports
  // counts at once. Without fresh stats, every open booking. (By binary
  // search in the replica's sorted starts: a scope may hold 256 bookings.)
  if (ws != nullptr) {
    for (DecodeCand& c : decode_cands) {
      const ReplicaScratch& r = replica_scratch[c.replica];
      if (r.work_stamp != stamp) continue;
      const std::vector<std::int64_t>& starts = ws->replicas[r.work].decode_starts;
      const auto after = [&](std::int64_t t) {
        return static_cast<std::uint32_t>(starts.end() -
                                          std::upper_bound(starts.begin(), starts.end(), t));
      };
      c.pending = after(c.reported_at);
      c.started = st.now > c.reported_at ? c.pending - after(st.now) : 0;
    }
  }
  for (DecodeCand& c : decode_cands) {
    const ReplicaScratch& r = replica_scratch[c.replica];
    const double pressure = r.pressure_stamp == stamp ? r.pressure : 0.0;
    const auto slots = static_cast<double>(pools.topology->decode[c.pool_index].slots);
    c.running = pressure * slots + c.pending;
    c.stalled = pressure * slots + c.started;
    c.load = c.running / slots;
    c.saturated = pressure >= saturation;
    c.full = c.saturated || c.running >= slots;
  }
}

const DecodeCand* Shard::Impl::pick_decode(const LookupState& st, auto cost, auto eligible) const {
  // The cheapest, then the deepest hold among the cheapest; the rendezvous
  // winner only when those tie (the prompt's seed hashes the whole chain).
  double least = std::numeric_limits<double>::infinity();
  for (const DecodeCand& c : decode_cands) {
    if (eligible(c)) least = std::min(least, cost(c));
  }
  const auto cheapest = [&](const DecodeCand& c) { return eligible(c) && cost(c) <= least + kTie; };
  const DecodeCand* best = nullptr;
  std::size_t tied = 0;
  for (const DecodeCand& c : decode_cands) {
    if (!cheapest(c)) continue;
    if (best == nullptr || c.held > best->held) {
      best = &c;
      tied = 1;
    } else if (c.held == best->held) {
      ++tied;
    }
  }
  if (tied < 2) return best;
  const std::uint64_t seed = prompt_seed(st);
  const std::int64_t held = best->held;
  std::uint64_t top = 0;
  best = nullptr;
  for (const DecodeCand& c : decode_cands) {
    if (!cheapest(c) || c.held != held) continue;
    const std::string& name = replicas.name(c.replica);
    const std::uint64_t weight = fmix64(seed ^ XXH3_64bits(name.data(), name.size()));
    if (best == nullptr || weight > top) {
      best = &c;
      top = weight;
    }
  }
  return best;
}

const DecodeCand* Shard::Impl::pick_free_first(const LookupState& st, auto cost,
                                               auto eligible) const {
  const DecodeCand* d =
      pick_decode(st, cost, [&](const DecodeCand& c) { return eligible(c) && !c.full; });
  return d != nullptr ? d : pick_decode(st, cost, eligible);
}

void Shard::Impl::gather_prefill_candidates(const LookupState& st, const WorkState* ws,
                                            const PdPools& pools, double prompt, double saturation,
                                            std::uint32_t stamp, auto pairs) {
  const config::PdTopology& topo = *pools.topology;
  const auto saturated = [&](std::uint32_t replica) {
    const ReplicaScratch& r = replica_scratch[replica];
    return r.pressure_stamp == stamp && r.pressure >= saturation;
  };
  const bool any_unsaturated = std::any_of(pools.prefill.begin(), pools.prefill.end(),
                                           [&](std::uint32_t r) { return !saturated(r); });
  work_cands.clear();
  prefill_pool_index.clear();
  for (std::size_t i = 0; i < pools.prefill.size(); ++i) {
    const std::uint32_t replica = pools.prefill[i];
    if (any_unsaturated && saturated(replica)) continue;
    const config::PdReplica& p = topo.prefill[i];
    const bool paired = std::any_of(decode_cands.begin(), decode_cands.end(), [&](const auto& d) {
      return pairs(d) && in_domain(topo, p, topo.decode[d.pool_index]);
    });
    if (!paired) continue;
    const ReplicaScratch& r = replica_scratch[replica];
    const std::uint32_t holder = r.held_stamp == stamp ? r.held : kNone;
    const std::int64_t matched = holder != kNone ? scored[holder].matched : 0;
    const double fresh = holder != kNone ? scored[holder].prob : 0.0;
    add_work_cand(st, ws, replica, holder, matched, fresh, prompt, saturation, stamp);
    prefill_pool_index.push_back(static_cast<std::uint32_t>(i));
  }
}

}  // namespace ic::index
