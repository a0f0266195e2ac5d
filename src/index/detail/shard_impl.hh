#pragma once
// Internal state of index::Shard (not part of the public API).
//
// Layout (docs/index.md "Keys"):
//   Key    = (domain, prefix hash bytes); domain = (tenant, model, scheme, adapter).
//   Group  = keys sharing (tenant, model, hash bytes) across schemes/adapters: the
//            GroupTable maps a group to its first key, so a lookup is one probe
//            plus a short chain walk, and PREFIX_EVICTED (no scheme) is one probe.
//   Entry  = (key, replica): 32 bytes in a slab, linked from its key.
//   Scope  = (tenant, model, scheme): replicas serving it with entry counts,
//            kept sorted by replica name (AFFINITY_HINT picks by index).
// All ids are dense uint32 (Interner / Slab indexes).

#include <openssl/evp.h>
#include <xxhash.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "index/detail/group_table.hh"
#include "index/detail/interner.hh"
#include "index/detail/slab.hh"
#include "index/shard.hh"

namespace ic::index {

namespace detail {

// MurmurHash3's 64-bit finalizer: a full-avalanche mix of one word.
inline std::uint64_t fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

// Stored tier values: 1..3 as in CacheTier; kTierInvalid = unknown/negative
// (coldest, reported UNSPECIFIED).
inline constexpr std::uint8_t kTierInvalid = 0xFF;

struct KeyRec {
  std::uint64_t hash = 0;  // bytes inline (len ≤ 8, zero-padded) or long_hashes index
  std::uint32_t domain = kNone;
  std::uint32_t first_entry = kNone;
  std::uint32_t next_in_group = kNone;
  std::uint32_t tenant_prev = kNone;  // per-tenant key list (quota, ALL_CLEARED)
  std::uint32_t tenant_next = kNone;
  std::uint8_t hash_len = 0;  // 0..8 inline; kLongHash → long_hashes[hash]
  bool live = false;
  std::uint16_t gen = 0;  // bumped on free: quota victim records go stale
};
inline constexpr std::uint8_t kLongHash = 0xFF;

struct EntryRec {
  std::int64_t last_seen = 0;  // producer wall µs
  std::uint32_t key = kNone;
  std::uint32_t replica = kNone;
  std::uint32_t next_in_key = kNone;
  std::int32_t token_count = 0;
  std::uint32_t access_count = 0;  // LFU credit
  std::uint8_t tier = 1;
  bool live = false;
  std::uint16_t gen = 0;  // bumped on free: victim records go stale
};
static_assert(sizeof(EntryRec) == 32);
static_assert(sizeof(KeyRec) == 32);

struct DomainKey {
  std::uint32_t tenant, model, scheme, adapter;
  bool operator==(const DomainKey&) const = default;
};
struct DomainKeyHash {
  std::size_t operator()(const DomainKey& k) const noexcept {
    std::uint64_t a = (std::uint64_t{k.tenant} << 32) | k.model;
    std::uint64_t b = (std::uint64_t{k.scheme} << 32) | k.adapter;
    a ^= b * 0x9E3779B97F4A7C15ull;
    a ^= a >> 29;
    a *= 0xBF58476D1CE4E5B9ull;
    return a ^ (a >> 32);
  }
};

struct DomainRec {
  DomainKey k{};
  std::uint32_t tm = kNone;
  std::uint32_t scope = kNone;
  std::int64_t key_count = 0;
};

struct StatsRec {
  std::uint32_t replica = kNone;  // holds an interner reference
  std::int64_t cache_memory_bytes = 0;
  double hit_rate = 0;
  double pressure = 0;
  std::int64_t t2_hit_tokens = 0;
  std::int64_t t2_query_tokens = 0;
  std::int64_t last_seen = 0;       // liveness (REPLICA_UPDATED refreshes it)
  std::int64_t stats_reported = 0;  // last stats-bearing update
};

// (tenant, model): key count and the replicas' stats.
struct TmRec {
  std::uint32_t tenant = kNone, model = kNone;
  std::int64_t key_count = 0;
  std::uint32_t domain_count = 0;
  std::vector<StatsRec> stats;
  bool live = false;
};

struct ScopeMember {
  std::uint32_t replica;
  std::uint32_t entries;
};
// Load-aware ranking: the decayed count of hints answered with `replica` on top
// (docs/ranking.md "Cost"). Holds an interner reference to the replica.
struct LoadRec {
  std::uint32_t replica;
  double hints;
};
struct ScopeRec {
  std::uint32_t tm = kNone, scheme = kNone;
  std::uint32_t domain_count = 0;
  std::vector<ScopeMember> members;  // sorted by replica name, bytewise
  std::vector<LoadRec> loads;        // unsorted; few replicas per scope
  bool live = false;
};

struct TenantRec {
  std::int64_t key_count = 0;
  std::uint32_t tm_count = 0;
  std::uint32_t key_head = kNone;
  // Cached from the PolicySet (set_policies / creation).
  std::int64_t ttl_us = 0;
  std::int64_t quota = -1;  // -1 = unbounded
  bool lfu = false;
  // Quota victims (evict.cc enforce_quota): the smallest keys by (newest
  // last_seen, key bytes, names) from the last scan, ascending, from
  // quota_pos on. Valid while every key outside it is larger: an upsert at or
  // below quota_threshold or any removal not made by the quota drops it.
  struct QuotaVictim {
    std::int64_t newest;
    std::uint32_t key;
    std::uint16_t gen;
  };
  std::vector<QuotaVictim> quota_victims;
  std::size_t quota_pos = 0;
  std::int64_t quota_threshold = 0;
  bool quota_valid = false;
  void drop_quota_victims() {
    quota_victims.clear();
    quota_pos = 0;
    quota_valid = false;
  }
};

// (tenant, replica) aggregate for /snapshot. `newest` is exact while
// at_newest > 0; when the last entry at it goes or moves back, it is only an
// upper bound and collect_snapshot recomputes it (one scan, only then).
struct TenantReplicaRec {
  std::int64_t entries = 0;
  std::int64_t newest = 0;
  std::int64_t at_newest = 0;  // entries whose last_seen == newest
  // An entry's last_seen moved from `from` (INT64_MIN: new entry) to `to`
  // (INT64_MIN: entry removed).
  void moved(std::int64_t from, std::int64_t to) {
    if (from != INT64_MIN && from == newest) --at_newest;
    if (to == INT64_MIN) return;
    if (to > newest || (at_newest <= 0 && entries == 1)) {
      newest = to;
      at_newest = 1;
    } else if (to == newest) {
      ++at_newest;
    }
  }
};

// One cap-victim candidate: snapshot of an entry's order key.
struct VictimRec {
  std::uint32_t entry;
  std::uint16_t gen;
  std::uint32_t a;  // access_count on LFU, else 0
  std::int64_t last_seen;
};

// Scratch state of one chain-match candidate replica.
struct ChainCand {
  std::uint32_t replica;
  std::uint32_t run;     // blocks matched
  std::int64_t matched;  // Σ request block_token_counts over the run
  std::int64_t oldest;   // oldest last_seen over the run
  std::uint8_t coldest;  // coldest stored tier over the run
};

// One candidate replica of the load-aware ranking (ranking.cc).
struct LoadCand {
  std::uint32_t replica;
  std::uint32_t holder;  // index into Shard::Impl::scored, kNone = holds nothing usable
  double cost;           // tokens: uncached prompt tokens + load_cost_tokens × load
  std::int64_t matched;  // tokens of the matched run (0 for a cold replica)
  bool saturated;        // fresh pressure ≥ saturation_pressure
};

// Per-replica-id scratch of the load-aware ranking: what one lookup gathered about a replica
// (valid when the stamp equals Shard::Impl::load_stamp; no clearing between lookups).
struct ReplicaScratch {
  std::uint32_t hints_stamp = 0;     // `hints` is this lookup's
  std::uint32_t pressure_stamp = 0;  // `pressure` is this lookup's (fresh stats)
  std::uint32_t cand_stamp = 0;      // already a candidate
  double hints = 0;
  double pressure = 0;
};

// Answer of the load-aware ranking.
enum class LoadAnswer : std::uint8_t { kNone, kPrefixMatch, kAffinityHint };

struct Scored {
  std::uint32_t replica;
  double score;
  std::int64_t matched;
  double prob;
  std::uint8_t tier;    // stored tier; 0 = UNSPECIFIED
  std::uint32_t run;    // chain: blocks in the run; exact: 0
  std::uint32_t entry;  // exact: the matched entry
};

}  // namespace detail

struct Shard::Impl {
  Impl(IndexConfig c, IndexGlobals* g, std::shared_ptr<const config::PolicySet> p);
  ~Impl();

  // --- configuration / shared state ---
  IndexConfig cfg;
  std::unique_ptr<IndexGlobals> own_globals;
  IndexGlobals* globals;
  std::shared_ptr<const config::PolicySet> policies;

  // --- interned names ---
  detail::Interner tenants, models, schemes, adapters, replicas;

  // --- records ---
  detail::Slab<detail::KeyRec> keys;
  detail::Slab<detail::EntryRec> entries;
  std::vector<std::string> long_hashes;
  std::vector<std::uint32_t> long_free;
  detail::GroupTable groups;

  std::unordered_map<detail::DomainKey, std::uint32_t, detail::DomainKeyHash> domain_ids;
  std::vector<detail::DomainRec> domains;
  std::vector<std::uint32_t> domain_free;

  std::unordered_map<std::uint64_t, std::uint32_t> tm_ids;  // tenant<<32|model
  std::vector<detail::TmRec> tms;
  std::vector<std::uint32_t> tm_free;

  std::unordered_map<std::uint64_t, std::uint32_t> scope_ids;  // tm<<32|scheme
  std::vector<detail::ScopeRec> scopes;
  std::vector<std::uint32_t> scope_free;

  std::vector<detail::TenantRec> tenant_recs;  // by tenant id
  std::vector<std::int64_t> model_keys;        // by model id
  std::vector<std::string> drained_models;     // report 0 once
  // mutable: collect_snapshot() makes stale `newest` values exact again.
  mutable std::unordered_map<std::uint64_t, detail::TenantReplicaRec> tenant_replicas;

  std::int64_t entry_total = 0;
  std::int64_t key_total = 0;
  std::int64_t unpublished = 0;  // entry delta not yet added to globals

  // --- eviction ---
  EvictionCounters evictions;
  std::unordered_map<std::string, std::uint64_t> tenant_evictions;
  // Cap victims (evict.cc): a min-heap by coarse order (a, last_seen, entry)
  // holding every entry whose coarse order is ≤ `threshold`, plus `group`: the
  // records of the smallest coarse value, sorted by the full order.
  std::vector<detail::VictimRec> victims;
  std::vector<detail::VictimRec> group;
  std::size_t group_pos = 0;
  bool victims_valid = false;
  detail::VictimRec threshold{};
  std::uint32_t sweep_cursor = 0;

  // --- lookup scratch (reused: no allocation per lookup once warm) ---
  std::vector<detail::ChainCand> cands;
  std::vector<detail::Scored> scored;
  std::vector<std::string_view> chain_hashes;  // resolved chain (views)
  std::vector<std::int32_t> chain_counts;
  std::vector<detail::LoadCand> load_cands;
  std::vector<detail::Scored> load_scratch;
  std::vector<detail::ReplicaScratch> replica_scratch;  // by replica id
  std::uint32_t load_stamp = 0;
  std::string fingerprint_buf;  // wire bytes of a token_ids chain
  EVP_MD_CTX* sha = nullptr;

  // ===== key / record plumbing (records.cc) =====
  // Seeded hash of (tenant-model id, prefix hash bytes) for the GroupTable;
  // the 8-byte wire form (the common case) takes a multiply-xorshift mix.
  static std::uint64_t group_hash(std::uint32_t tm, std::string_view bytes) {
    constexpr std::uint64_t kGroupSeed = 0x5EED1DC0FFEEull;
    if (bytes.size() == 8) {
      std::uint64_t v;
      __builtin_memcpy(&v, bytes.data(), 8);
      return detail::fmix64(v ^ detail::fmix64(kGroupSeed + tm));
    }
    return XXH3_64bits_withSeed(bytes.data(), bytes.size(), kGroupSeed + tm);
  }
  std::string_view key_bytes(const detail::KeyRec& k) const;
  // Inline: this is the innermost comparison of every probe.
  bool key_bytes_equal(const detail::KeyRec& k, std::string_view bytes) const {
    if (k.hash_len == detail::kLongHash) return long_hashes[k.hash] == bytes;
    if (k.hash_len != bytes.size()) return false;
    std::uint64_t v = 0;
    if (!bytes.empty()) __builtin_memcpy(&v, bytes.data(), bytes.size() < 8 ? bytes.size() : 8);
    return v == k.hash;
  }
  // Group head for (tm, bytes) or kNone.
  std::uint32_t find_group(std::uint32_t tm, std::uint64_t h, std::string_view bytes) const;
  // Key of (domain, bytes) or kNone. No allocation.
  std::uint32_t find_key(std::uint32_t domain, std::string_view bytes) const;
  // Same with the group hash precomputed (h = group_hash(tm of domain, bytes)).
  std::uint32_t find_key_hashed(std::uint32_t domain, std::uint32_t tm, std::uint64_t h,
                                std::string_view bytes) const;
  // Entry of `replica` in key `k` or kNone.
  std::uint32_t find_entry(std::uint32_t k, std::uint32_t replica) const;

  std::uint32_t find_domain(std::string_view tenant, std::string_view model,
                            std::string_view scheme, std::string_view adapter) const;
  std::uint32_t find_tm(std::uint32_t tenant, std::uint32_t model) const;
  std::uint32_t find_scope(std::uint32_t tm, std::uint32_t scheme) const;

  std::uint32_t get_or_create_domain(std::string_view tenant, std::string_view model,
                                     std::string_view scheme, std::string_view adapter);
  std::uint32_t get_or_create_tm(std::uint32_t tenant, std::uint32_t model);
  // New key of (domain, bytes); `h` = its group hash, `head` = the group's
  // current head key or kNone (the caller just probed for both).
  std::uint32_t create_key(std::uint32_t domain, std::string_view bytes, std::uint64_t h,
                           std::uint32_t head);
  std::uint32_t create_entry(std::uint32_t k, std::uint32_t replica);

  void remove_entry(std::uint32_t e);  // cascades to key/domain/tm/tenant
  void remove_key_record(std::uint32_t k);
  void remove_domain(std::uint32_t d);
  void maybe_remove_tm(std::uint32_t tm);
  void scope_add(std::uint32_t scope, std::uint32_t replica);
  void scope_sub(std::uint32_t scope, std::uint32_t replica);
  void tenant_replica_add(std::uint32_t tenant, std::uint32_t replica, std::int64_t seen);
  void tenant_replica_sub(std::uint32_t tenant, std::uint32_t replica, std::int64_t seen);
  // An existing entry's last_seen changed from `from` to `to`.
  void tenant_replica_seen(std::uint32_t tenant, std::uint32_t replica, std::int64_t from,
                           std::int64_t to);
  detail::TenantRec& tenant_rec(std::uint32_t tenant);
  void refresh_tenant_policy(std::uint32_t tenant);
  std::int64_t ttl_of(std::uint32_t tenant) const;
  std::int64_t ttl_for_policy(const config::CachePolicy& p) const;

  // Recomputes TenantReplicaRec::newest where it is only an upper bound.
  void refresh_stale_newest() const;
  // Publishes the entry delta to the globals; returns the new global total.
  std::int64_t publish();

  // ===== eviction (evict.cc) =====
  std::uint32_t order_a(const detail::EntryRec& e) const;
  // Strict total order of docs/index.md: (a, last_seen, key bytes, names, replica).
  bool victim_full_less(const detail::VictimRec& x, const detail::VictimRec& y) const;
  bool victim_current(const detail::VictimRec& v) const;
  detail::VictimRec victim_of(std::uint32_t e) const;
  void on_order_change(std::uint32_t e);
  void push_victim(const detail::VictimRec& v);
  void rebuild_victims();
  std::uint32_t pop_victim();
  std::uint32_t evict_cap(std::int64_t need);
  // Removes cap victim `e` (counted as a cap eviction).
  void evict_victim(std::uint32_t e);

  // ===== global cap across shards (global_cap.cc) =====
  int slot = -1;  // IndexGlobals::oldest slot, -1 = none
  // The next cap victim without taking it, or kNone.
  std::uint32_t peek_victim();
  // Publishes the next victim's last_seen in globals->oldest[slot].
  void publish_oldest();
  // publish_oldest() when the global `total` is near the cap.
  void note_oldest(std::int64_t total);
  // The oldest last_seen published by another shard, and its slot (-1: none).
  std::pair<std::int64_t, int> oldest_elsewhere() const;
  // True when `e` may go now: within cap_slack_us of `elsewhere`.
  bool within_slack(std::uint32_t e, std::int64_t elsewhere) const;
  std::int64_t slack_entries() const;
  // After an ingest took the total over the cap (docs/hostile-peers.md).
  std::uint32_t settle_cap(std::int64_t total, int& handoff);
  CapPayment pay_cap_debt();
  std::uint32_t enforce_quota(std::uint32_t tenant);
  std::int64_t key_newest(std::uint32_t k) const;
  bool quota_less(std::int64_t xn, std::uint32_t x, std::int64_t yn, std::uint32_t y) const;
  void rebuild_quota_victims(detail::TenantRec& t, std::uint32_t tenant, std::int64_t batch);
  bool quota_evicting = false;  // removals by the quota keep its victim list
  void invalidate_victims();

  // ===== ingest / events (ingest.cc) =====
  IngestResult ingest(const pb::CacheStateUpdate& u, std::int64_t now);
  void upsert(std::uint32_t domain, std::string_view bytes, std::int32_t tokens, std::int64_t seen,
              std::uint8_t tier, std::uint32_t replica, IngestResult& r);
  void apply_stats(std::uint32_t tm, std::uint32_t replica_ref, const pb::ReplicaStats& s,
                   std::int64_t seen);
  std::size_t apply_event(const pb::CacheEvent& ev, std::int64_t now);

  // ===== load-aware ranking (ranking.cc, docs/ranking.md) =====
  // Ranks the holders in `scored` (after the matched-tokens floor; may be
  // empty) and, when `allow_cold`, the scope's other replicas and the fresh
  // stats reporters of (tenant, model), by cost. `prompt_tokens` = the
  // request's effective tokens; `exact_hash` seeds the affinity pick of an
  // exact request (a chain request uses chain_hashes). On return `scored`
  // holds the answer: the holders to list for kPrefixMatch (unsorted, scores
  // set), the one replica for kAffinityHint, nothing for kNone.
  detail::LoadAnswer rank_load_aware(std::uint32_t scope, std::uint32_t tm, std::int64_t now,
                                     std::int64_t prompt_tokens, bool allow_cold,
                                     const config::LoadAwareKnobs& knobs,
                                     std::string_view exact_hash);
  // Fills load_cands: the holders in `scored`, then (allow_cold) the scope's
  // other replicas and the fresh stats reporters, each with its cost.
  void gather_load_candidates(std::uint32_t scope, std::uint32_t tm, std::int64_t now,
                              double prompt, bool allow_cold, const config::LoadAwareKnobs& knobs);
  // AFFINITY_HINT of the load-aware ranking: among the cold candidates within
  // one unit of load of `best`, the rendezvous-hash winner for the prompt.
  std::uint32_t affinity_among_light(const detail::LoadCand& best,
                                     const config::LoadAwareKnobs& knobs,
                                     std::string_view exact_hash) const;
  // The tenant's load-aware knobs: its policy's, else the server's (cfg.load_aware).
  config::LoadAwareKnobs resolve_knobs(const config::CachePolicy& p) const;
  // Decays the scope's hint counts by 1 − 1/window and adds one to `replica`.
  void record_hint(std::uint32_t scope, std::uint32_t replica, double window);
  // Drops the scope's hint counts (scope removal).
  void clear_loads(detail::ScopeRec& sr);
  // ===== change reports (changes.cc; only called when `sink` is set) =====
  ChangeSink* sink = nullptr;
  bool quiet_removals = false;  // ALL_CLEARED reports itself, not each entry
  Change prefix_change(ChangeType type, std::uint32_t e) const;
  void report_upsert(std::uint32_t e);
  void report_removal(std::uint32_t e);
  void report_replica(ChangeType type, std::uint32_t tm, std::uint32_t replica, std::int64_t seen);
  void report_cleared(const pb::CacheEvent& ev);

  // ===== lookup (lookup.cc) =====
  void lookup(const pb::LookupRouteRequest& req, const LookupContext& ctx,
              pb::LookupRouteResponse* out);
};

}  // namespace ic::index
