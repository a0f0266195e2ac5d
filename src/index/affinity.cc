// LookupRoute step 12 (docs/lookup.md): AFFINITY_HINT when nothing matched —
// the reference pick (SHA-256 of the input over the scope's replicas), or
// the load-aware ranking (docs/ranking.md), which also re-ranks PREFIX_MATCH
// by cost.

#include <openssl/evp.h>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// The one-replica AFFINITY_HINT answer.
ReplicaScore affinity_score(std::string_view replica) {
  ReplicaScore rs;
  rs.replica_id = replica;
  return rs;
}

}  // namespace

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
  if (st.load_aware || st.outcome != Outcome::kNone || !st.pol.affinity_routing ||
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

}  // namespace ic::index
