// LookupRoute step 7 for a chain (docs/lookup.md step 7, "Scoring"): the
// longest leading run of the request's blocks each replica holds, scored by
// matched tokens, freshness, pressure and depth-aware distinguishing power.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

// Candidates: the live holders of block 0.
void Shard::Impl::start_chain_run(const LookupState& st) {
  cands.clear();
  const std::uint32_t k0 = st.domain == kNone ? kNone : find_key(st.domain, chain_hashes[0]);
  if (k0 == kNone) return;
  for (std::uint32_t e = keys[k0].first_entry; e != kNone; e = entries[e].next_in_key) {
    const EntryRec& er = entries[e];
    if (st.now - er.last_seen >= st.ttl) continue;
    cands.push_back(ChainCand{er.replica, 1, chain_counts[0], er.last_seen, er.tier});
  }
}

// Extends every candidate's run block by block; cands[0, active) still run.
void Shard::Impl::extend_chain_runs(std::uint32_t domain, std::int64_t now, std::int64_t ttl) {
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
}

void Shard::Impl::score_chain_runs(const LookupState& st) {
  for (const ChainCand& c : cands) {
    if (c.matched <= 0) continue;
    const double fresh = freshness(st.now, c.oldest, st.ttl);
    if (fresh <= 0) continue;
    const double score = holder_score(st, c.replica, c.matched, fresh);
    scored.push_back(Scored{c.replica, score, c.matched, fresh, c.coldest, c.run, kNone});
  }
  if (st.load_aware) return;
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

}  // namespace ic::index
