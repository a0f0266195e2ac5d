// LookupRoute: the gates, matching and ranking of docs/lookup.md, steps 0–13
// in order. Reads only this shard plus the global entry count (cold start).

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>

#include "fingerprint/fingerprint.hh"
#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

enum class Outcome {
  kNone,       // no positive result; AFFINITY_HINT may still apply
  kNoneFinal,  // empty tenant/model/scheme: NO_HINT, no affinity
  kPrefixMatch,
  kTenantHot,
  kUnknownTenant,
  kUnknownModel,
  kUnknownHashScheme,
};

std::string_view outcome_reason(Outcome o) {
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

// Linear freshness 1 − age/ttl clamped to [0, 1]; age ≤ 0 → 1 (docs/index.md).
double freshness(std::int64_t now, std::int64_t seen, std::int64_t ttl) {
  const std::int64_t age = now - seen;
  if (age <= 0) return 1.0;
  if (ttl <= 0) return 0.0;
  return std::clamp(1.0 - static_cast<double>(age) / static_cast<double>(ttl), 0.0, 1.0);
}

// Distinguishing power dp(m, t) of docs/lookup.md "Scoring".
double distinguishing_power(std::size_t m, std::size_t t) {
  if (t <= 1) return 1.0;
  if (m >= t) return 0.0;
  return 1.0 - static_cast<double>(m) / static_cast<double>(t);
}

pb::CacheTier wire_tier(std::uint8_t stored) {
  return stored >= 1 && stored <= 3 ? static_cast<pb::CacheTier>(stored)
                                    : pb::CACHE_TIER_UNSPECIFIED;
}

SystemClock& fallback_clock() {
  static SystemClock clock;
  return clock;
}

}  // namespace

void Shard::Impl::lookup(const pb::LookupRouteRequest& req, const LookupContext& ctx,
                         pb::LookupRouteResponse* out) {
  out->Clear();
  // Step 1: the reserved tenant never touches the index.
  if (req.tenant_id() == config::kReservedTenant) {
    out->set_reason_code(std::string(reason::kNoHint));
    out->set_adapter_id(req.adapter_id());
    out->set_lookup_latency_us(0);
    return;
  }
  // Step 0: the clock.
  Clock& clock = ctx.clock != nullptr ? *ctx.clock : fallback_clock();
  const std::int64_t start = ctx.start_mono_us >= 0 ? ctx.start_mono_us : clock.monotonic_us();
  const std::int64_t now = clock.wall_us();
  const config::CachePolicy& pol = policies->policy_for(req.tenant_id());
  const std::int64_t ttl = ttl_for_policy(pol);
  const bool load_aware =
      (pol.ranking == config::Ranking::kServerDefault ? cfg.ranking : pol.ranking) ==
      config::Ranking::kLoadAware;

  // Step 2: deadline = the tighter of grpc-timeout and lookupTimeoutMs.
  std::int64_t deadline = ctx.deadline_mono_us;
  if (pol.lookup_timeout_ms > 0)
    deadline = std::min(deadline, start + std::int64_t{pol.lookup_timeout_ms} * 1000);
  auto past_deadline = [&] { return deadline != INT64_MAX && clock.monotonic_us() >= deadline; };
  bool echo_tokens = false;  // step 5 resolved tokens made from prompt_text
  auto finish = [&](std::string_view code, bool echo_adapter) {
    out->set_reason_code(std::string(code));
    if (echo_adapter) out->set_adapter_id(req.adapter_id());
    if (echo_tokens) *out->mutable_token_ids() = req.token_ids();
    out->set_lookup_latency_us(std::max<std::int64_t>(0, clock.monotonic_us() - start));
  };

  // Step 3: TIMEOUT has the highest precedence of all.
  if (past_deadline()) return finish(reason::kTimeout, false);

  // Step 4: requireChain needs a valid wire chain.
  const bool wire_chain =
      req.block_hashes_size() > 0 && req.block_hashes_size() == req.block_token_counts_size();
  if (pol.require_chain && !wire_chain) return finish(reason::kPolicyRequiresChain, false);

  // Step 5: resolve the input.
  chain_hashes.clear();
  chain_counts.clear();
  bool chain = false;
  std::string_view exact_hash;
  std::int64_t exact_tokens = 0;
  const bool has_arrays = req.block_hashes_size() > 0 || req.block_token_counts_size() > 0;
  // token_ids → fingerprint chain with the engine block size; false = fail open.
  auto resolve_tokens = [&]() -> bool {
    const auto n = static_cast<std::size_t>(req.token_ids_size());
    const std::int32_t bs = cfg.engine_block_size;
    if (n > cfg.max_token_ids || bs <= 0) return false;
    const std::size_t blocks = n / static_cast<std::size_t>(bs);
    if (blocks == 0) return false;
    fingerprint_buf.resize(blocks * 8);
    const std::uint32_t* tokens = req.token_ids().data();
    std::uint64_t prefix = 0;
    for (std::size_t i = 0; i < blocks; ++i) {
      const std::uint64_t content = fingerprint::content_hash(std::span<const std::uint32_t>(
          tokens + i * static_cast<std::size_t>(bs), static_cast<std::size_t>(bs)));
      prefix = i == 0 ? content : fingerprint::chain_hash(prefix, content);
      const auto wire = fingerprint::to_wire(prefix);
      std::copy(wire.begin(), wire.end(), fingerprint_buf.begin() + static_cast<long>(i * 8));
    }
    for (std::size_t i = 0; i < blocks; ++i) {
      chain_hashes.emplace_back(fingerprint_buf.data() + i * 8, 8);
      chain_counts.push_back(bs);
    }
    return true;
  };
  if (!pol.enable_chain_matching) {
    if (!req.prefix_hash().empty()) {
      exact_hash = req.prefix_hash();
      exact_tokens = req.prefix_token_count();
    } else if (req.token_ids_size() > 0) {
      echo_tokens = ctx.token_ids_from_prompt;
      if (!resolve_tokens()) return finish(reason::kNoHint, false);
      // The exact key is the last block hash with the total count.
      exact_hash = chain_hashes.back();
      exact_tokens = static_cast<std::int64_t>(chain_hashes.size()) * cfg.engine_block_size;
      chain_hashes.clear();
      chain_counts.clear();
    } else {
      // prompt_text needs a tokenizer (none loaded); nothing supplied: no key.
      return finish(reason::kNoHint, false);
    }
  } else if (!req.prefix_hash().empty() || has_arrays) {
    if (req.block_hashes_size() != req.block_token_counts_size())
      return finish(reason::kNoHint, false);  // malformed: never downgrade to prefix_hash
    if (req.block_hashes_size() > 0) {
      chain = true;
      // Range iteration stays inline (indexed Get() is an out-of-line call).
      for (const std::string& h : req.block_hashes()) chain_hashes.emplace_back(h);
      chain_counts.assign(req.block_token_counts().begin(), req.block_token_counts().end());
    } else {
      exact_hash = req.prefix_hash();
      exact_tokens = req.prefix_token_count();
    }
  } else if (req.token_ids_size() > 0) {
    echo_tokens = ctx.token_ids_from_prompt;
    if (!resolve_tokens()) return finish(reason::kNoHint, false);
    chain = true;
  } else if (!req.prompt_text().empty()) {
    // prompt_text: no tokenizer is loaded for any model yet → fail open.
    return finish(reason::kNoHint, false);
  } else {
    exact_tokens = req.prefix_token_count();  // exact lookup on an empty prefix_hash
  }
  if (past_deadline()) return finish(reason::kTimeout, false);

  // Step 6: minimum-prefix gate.
  std::int64_t effective = exact_tokens;
  if (chain) {
    effective = 0;
    for (std::int32_t c : chain_counts) effective += c;
  }
  const bool below_min =
      pol.minimum_prefix_tokens > 0 && effective < std::int64_t{pol.minimum_prefix_tokens};
  if (below_min && !pol.affinity_routing) return finish(reason::kNoHint, true);

  // Step 7: the index lookup.
  Outcome outcome = Outcome::kNone;
  scored.clear();
  const std::uint32_t tenant = tenants.find(req.tenant_id());
  const std::uint32_t tm = find_tm(tenant, models.find(req.model_id()));
  const std::uint32_t scope = find_scope(tm, schemes.find(req.hash_scheme()));
  const std::size_t serving = scope == kNone ? 0 : scopes[scope].members.size();
  const std::uint32_t domain = scope == kNone ? kNone
                                              : find_domain(req.tenant_id(), req.model_id(),
                                                            req.hash_scheme(), req.adapter_id());
  const bool slo_tight = req.slo().ttft_ms() > 0 && req.slo().ttft_ms() < cfg.slo_tight_ttft_ms;
  auto stats_of = [&](std::uint32_t replica) -> const StatsRec* {
    if (tm == kNone) return nullptr;
    for (const StatsRec& s : tms[tm].stats) {
      if (s.replica == replica) return &s;
    }
    return nullptr;
  };
  auto pressure_factor = [&](std::uint32_t replica) {
    const StatsRec* s = stats_of(replica);
    const double p = s != nullptr && now - s->stats_reported < ttl ? s->pressure : 0.0;
    return std::clamp(1.0 - cfg.pressure_weight * p, 0.0, 1.0);
  };
  auto classify_miss = [&]() {
    if (globals->total_entries.load(std::memory_order_relaxed) == 0) return Outcome::kNone;
    if (tenant == kNone || tenant_recs[tenant].key_count == 0) return Outcome::kUnknownTenant;
    if (tm == kNone || tms[tm].key_count == 0) return Outcome::kUnknownModel;
    if (serving == 0) return Outcome::kUnknownHashScheme;
    return Outcome::kNone;
  };

  if (req.tenant_id().empty() || req.model_id().empty() || req.hash_scheme().empty()) {
    outcome = Outcome::kNoneFinal;
  } else if (chain) {
    // Longest leading run per replica; cands[0, active) are still running.
    cands.clear();
    const std::uint32_t k0 = domain == kNone ? kNone : find_key(domain, chain_hashes[0]);
    if (k0 != kNone) {
      for (std::uint32_t e = keys[k0].first_entry; e != kNone; e = entries[e].next_in_key) {
        const EntryRec& er = entries[e];
        if (now - er.last_seen >= ttl) continue;
        cands.push_back(ChainCand{er.replica, 1, chain_counts[0], er.last_seen, er.tier});
      }
    }
    std::size_t active = cands.size();
    const std::uint32_t dtm = domain == kNone ? kNone : domains[domain].tm;
    std::uint64_t h_next =
        active > 0 && chain_hashes.size() > 1 ? group_hash(dtm, chain_hashes[1]) : 0;
    for (std::size_t i = 1; i < chain_hashes.size() && active > 0; ++i) {
      // Hash and prefetch block i+1's slot while block i is matched.
      const std::uint64_t h = h_next;
      if (i + 1 < chain_hashes.size()) {
        h_next = group_hash(dtm, chain_hashes[i + 1]);
        groups.prefetch(h_next);
      }
      const std::uint32_t k = find_key_hashed(domain, dtm, h, chain_hashes[i]);
      if (k == kNone) break;
      std::size_t next = 0;
      for (std::uint32_t e = keys[k].first_entry; e != kNone; e = entries[e].next_in_key) {
        const EntryRec& er = entries[e];
        if (now - er.last_seen >= ttl) continue;
        for (std::size_t c = next; c < active; ++c) {
          if (cands[c].replica != er.replica) continue;
          ChainCand& cc = cands[c];
          ++cc.run;
          cc.matched += chain_counts[i];
          cc.oldest = std::min(cc.oldest, er.last_seen);
          cc.coldest = std::max(cc.coldest, er.tier);
          // Keep continuing replicas in front; usually c == next already
          // (entries of a key are listed in the same replica order), and a
          // self-swap would stall on store-to-load forwarding.
          if (c != next) std::swap(cands[c], cands[next]);
          ++next;
          break;
        }
      }
      active = next;
    }
    for (const ChainCand& c : cands) {
      if (c.matched <= 0) continue;
      const double fresh = freshness(now, c.oldest, ttl);
      if (fresh <= 0) continue;
      // The load-aware ranking prices the replicas itself (ranking.cc): no reference score.
      const double slo = slo_tight ? 1.0 + fresh * cfg.slo_bias : 1.0;
      const double score =
          load_aware ? 0.0
                     : static_cast<double>(c.matched) * fresh * pressure_factor(c.replica) * slo;
      scored.push_back(Scored{c.replica, score, c.matched, fresh, c.coldest, c.run, kNone});
    }
    // Depth-aware distinguishing power: m = replicas at least this deep.
    for (Scored& s : scored) {
      if (load_aware) break;
      std::size_t m = 0;
      for (const Scored& o : scored) m += o.matched >= s.matched ? 1 : 0;
      s.score *= distinguishing_power(m, serving);
    }
    if (!scored.empty()) {
      outcome = Outcome::kPrefixMatch;
    } else if (cands.empty()) {
      outcome = classify_miss();
    }
  } else {
    const std::uint32_t k = domain == kNone ? kNone : find_key(domain, exact_hash);
    if (k != kNone) {
      for (std::uint32_t e = keys[k].first_entry; e != kNone; e = entries[e].next_in_key) {
        const EntryRec& er = entries[e];
        const double fresh = freshness(now, er.last_seen, ttl);
        if (fresh <= 0) continue;
        const double slo = slo_tight ? 1.0 + fresh * cfg.slo_bias : 1.0;
        const double score = load_aware ? 0.0
                                        : static_cast<double>(er.token_count) * fresh *
                                              pressure_factor(er.replica) * slo;
        scored.push_back(Scored{er.replica, score, er.token_count, fresh, er.tier, 0, e});
      }
      const double dp = distinguishing_power(scored.size(), serving);
      for (Scored& s : scored) s.score *= dp;
    }
    if (!scored.empty()) {
      outcome = Outcome::kPrefixMatch;
    } else {
      // TENANT_HOT: warm replicas of the scope by recent stats.
      const std::int64_t window = cfg.tenant_hot_window_us;
      if (window > 0 && serving > 0) {
        for (const StatsRec& s : tms[tm].stats) {
          const std::int64_t age = now - s.stats_reported;
          if (age >= window || s.hit_rate < cfg.tenant_hot_min_hit_rate) continue;
          const auto& members = scopes[scope].members;
          if (std::none_of(members.begin(), members.end(),
                           [&](const ScopeMember& m) { return m.replica == s.replica; }))
            continue;
          const double recency =
              std::clamp(1.0 - static_cast<double>(age) / static_cast<double>(window), 0.0, 1.0);
          const double slo = slo_tight ? 1.0 + recency * cfg.slo_bias : 1.0;
          scored.push_back(Scored{s.replica,
                                  s.hit_rate * recency * pressure_factor(s.replica) * slo, 0,
                                  s.hit_rate, 0, 0, kNone});
        }
      }
      outcome = scored.empty() ? classify_miss() : Outcome::kTenantHot;
    }
  }
  if (past_deadline()) return finish(reason::kTimeout, false);

  // Step 8: enableTenantHot.
  if (outcome == Outcome::kTenantHot && !pol.enable_tenant_hot) outcome = Outcome::kNone;
  // Step 9: minimum-prefix demotion (affinity enabled here).
  if (below_min && (outcome == Outcome::kPrefixMatch || outcome == Outcome::kTenantHot))
    outcome = Outcome::kNone;
  if (outcome == Outcome::kPrefixMatch) {
    // Step 10: matched-tokens floor.
    const std::int64_t floor = pol.minimum_matched_tokens;
    std::erase_if(scored, [&](const Scored& s) { return s.matched < floor; });
    if (scored.empty()) outcome = Outcome::kNone;
  }
  if (!load_aware && outcome == Outcome::kPrefixMatch && pol.routing_floor_score > 0) {
    // Step 11: routing floor on the top score (the load-aware ranking has its own cost).
    double top = 0;
    for (const Scored& s : scored) top = std::max(top, s.score);
    if (top < pol.routing_floor_score) outcome = Outcome::kNone;
  }
  if (outcome != Outcome::kPrefixMatch && outcome != Outcome::kTenantHot) scored.clear();

  // Load-aware ranking (docs/ranking.md): re-ranks PREFIX_MATCH by cost and
  // replaces the reference AFFINITY_HINT of step 12.
  const config::LoadAwareKnobs knobs = load_aware ? resolve_knobs(pol) : config::LoadAwareKnobs{};
  if (load_aware && (outcome == Outcome::kPrefixMatch || outcome == Outcome::kNone) &&
      scope != kNone && (chain || !exact_hash.empty())) {
    const LoadAnswer a =
        rank_load_aware(scope, tm, now, effective, pol.affinity_routing, knobs, exact_hash);
    if (a == LoadAnswer::kAffinityHint) {
      record_hint(scope, scored.front().replica, knobs.load_window);
      auto* rs = out->add_replica_scores();
      rs->set_replica_id(replicas.name(scored.front().replica));
      rs->set_tier(pb::CACHE_TIER_UNSPECIFIED);
      return finish(reason::kAffinityHint, true);
    }
    outcome = a == LoadAnswer::kPrefixMatch ? Outcome::kPrefixMatch : Outcome::kNone;
  }

  // Step 12: AFFINITY_HINT.
  if (!load_aware && outcome == Outcome::kNone && pol.affinity_routing && serving > 0 &&
      (chain || !exact_hash.empty())) {
    EVP_DigestInit_ex(sha, EVP_sha256(), nullptr);
    if (chain) {
      for (std::string_view h : chain_hashes) {
        const auto n = static_cast<std::uint32_t>(h.size());
        const unsigned char len[4] = {
            static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
            static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
        EVP_DigestUpdate(sha, len, 4);
        EVP_DigestUpdate(sha, h.data(), h.size());
      }
    } else {
      EVP_DigestUpdate(sha, exact_hash.data(), exact_hash.size());
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    EVP_DigestFinal_ex(sha, digest, &dlen);
    std::uint64_t pick = 0;
    for (int i = 0; i < 8; ++i) pick = (pick << 8) | digest[i];
    const ScopeMember& m = scopes[scope].members[pick % serving];
    auto* rs = out->add_replica_scores();
    rs->set_replica_id(replicas.name(m.replica));
    rs->set_tier(pb::CACHE_TIER_UNSPECIFIED);
    return finish(reason::kAffinityHint, true);
  }

  // Step 13: LFU credit on a delivered PREFIX_MATCH, then the response.
  if (outcome == Outcome::kPrefixMatch && pol.eviction == config::EvictionAlgorithm::kLfu) {
    for (const Scored& s : scored) {
      if (!chain) {
        ++entries[s.entry].access_count;
        on_order_change(s.entry);
        continue;
      }
      for (std::uint32_t i = 0; i < s.run; ++i) {
        const std::uint32_t k = find_key(domain, chain_hashes[i]);
        const std::uint32_t e = k == kNone ? kNone : find_entry(k, s.replica);
        if (e == kNone) break;
        ++entries[e].access_count;
        on_order_change(e);
      }
    }
  }
  std::sort(scored.begin(), scored.end(), [&](const Scored& a, const Scored& b) {
    const float fa = static_cast<float>(a.score), fb = static_cast<float>(b.score);
    if (fa != fb) return fa > fb;
    return replicas.name(a.replica) < replicas.name(b.replica);
  });
  if (load_aware && outcome == Outcome::kPrefixMatch)
    record_hint(scope, scored.front().replica, knobs.load_window);
  for (const Scored& s : scored) {
    auto* rs = out->add_replica_scores();
    rs->set_replica_id(replicas.name(s.replica));
    rs->set_score(static_cast<float>(s.score));
    rs->set_matched_tokens(
        static_cast<std::int32_t>(std::clamp<std::int64_t>(s.matched, INT32_MIN, INT32_MAX)));
    rs->set_estimated_cache_hit_prob(static_cast<float>(s.prob));
    rs->set_tier(outcome == Outcome::kTenantHot ? pb::CACHE_TIER_UNSPECIFIED : wire_tier(s.tier));
  }
  finish(outcome_reason(outcome), true);
}

}  // namespace ic::index
