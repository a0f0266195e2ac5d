#pragma once
// The index's records and the tables that hold them (part of Shard::Impl,
// detail/shard_impl.hh). Every file of the index reads these.
//
// Layout (docs/index.md "Keys"):
//   Key    = (domain, prefix hash bytes); domain = (tenant, model, scheme, adapter).
//   Group  = keys sharing (tenant, model, hash bytes) across schemes/adapters:
//            they hash alike, so the KeyTable holds them in one probe run and
//            PREFIX_EVICTED (no scheme) walks one run.
//   Entry  = (key, replica): the key's first entry inline in its 40-byte
//            KeyRec, the others in 32-byte SpillRecs linked from the key.
//   Bytes per entry at one replica per key: 40 + 6.7-10 for the key table
//   slot and tag (docs/index.md "Layout and memory").
//   Scope  = (tenant, model, scheme): replicas serving it with entry counts,
//            kept sorted by replica name (AFFINITY_HINT picks by index).
// All ids are dense uint32 (Interner / Slab indexes).

#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "index/detail/interner.hh"
#include "index/detail/key_table.hh"
#include "index/detail/slab.hh"
#include "index/detail/work_state.hh"

namespace ic::index::detail {

// MurmurHash3's 64-bit finalizer: a full-avalanche mix of one word.
inline std::uint64_t fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

// The key table's hash of (tenant-model id `tm`, prefix hash bytes) under a
// shard's secret `seed` (docs/hostile-peers.md "Key table seed"); the 8-byte
// wire form (the common case) takes a multiply-xorshift mix. Keys of one group
// (other schemes or adapters) hash alike. Made once per (seed, tm): a loop
// over a chain's blocks keeps the seed's mix in a register (a store to the
// chain's hash array could alias the shard's seed and force a reload).
class GroupHasher {
 public:
  GroupHasher(std::uint64_t seed, std::uint32_t tm) : seed_(seed + tm), mix_(fmix64(seed + tm)) {}
  std::uint64_t operator()(std::string_view bytes) const {
    if (bytes.size() == 8) {
      std::uint64_t v;
      __builtin_memcpy(&v, bytes.data(), 8);
      return fmix64(v ^ mix_);
    }
    return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed_);
  }

 private:
  std::uint64_t seed_;  // seed + tm
  std::uint64_t mix_;   // fmix64(seed + tm)
};

inline std::uint64_t group_hash(std::uint64_t seed, std::uint32_t tm, std::string_view bytes) {
  return GroupHasher(seed, tm)(bytes);
}

// Stored tier values: 1..3 as in CacheTier; kTierInvalid = unknown/negative
// (coldest, reported UNSPECIFIED).
inline constexpr std::uint8_t kTierInvalid = 0xFF;

// What the index knows of one (key, replica) entry. A key's first entry lives
// inline in its KeyRec (most keys have one replica), the others in SpillRecs.
// The entry is absent (free) while `replica` is kNone.
struct EntryFields {
  std::int64_t last_seen = 0;  // producer wall µs
  std::uint32_t replica = kNone;
  std::int32_t token_count = 0;
  std::uint32_t access_count = 0;  // LFU credit
  std::uint8_t tier = 1;
  // KeyRec: the key's hash length (0..8 inline; kLongHash → long_hashes);
  // SpillRec: unused. Here so that the key record stays 40 bytes.
  std::uint8_t hash_len = 0;
  // Bumped on free: stale victim records of a reused slot are told apart. In
  // a KeyRec it counts the key's and its inline entry's frees together.
  std::uint16_t gen = 0;
};
static_assert(sizeof(EntryFields) == 24);

struct KeyRec {
  std::uint64_t hash = 0;        // bytes inline (len ≤ 8, zero-padded) or long_hashes index
  EntryFields entry;             // the inline entry (entry.replica == kNone: none)
  std::uint32_t domain = kNone;  // kNone: a free key slot
  std::uint32_t spill = kNone;   // the first SpillRec of the key's other entries
  bool live() const { return domain != kNone; }
  std::uint16_t& generation() { return entry.gen; }
};
inline constexpr std::uint8_t kLongHash = 0xFF;

// An entry of a key whose inline entry is taken, linked from the key.
struct SpillRec {
  EntryFields entry;
  std::uint32_t key = kNone;
  std::uint32_t next = kNone;  // the key's next SpillRec
  std::uint16_t& generation() { return entry.gen; }
};
static_assert(sizeof(SpillRec) == 32);
static_assert(sizeof(KeyRec) == 40);

// An entry handle: a key id (its inline entry) or kSpill | a SpillRec id.
// Key and spill ids stay below kSpill (2^31 records of 32+ bytes are 64 GB).
inline constexpr std::uint32_t kSpill = 0x80000000u;

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
  std::int64_t prefix_cache_hit_tokens = 0;  // the engine's counters (ReplicaStats 8, 9)
  std::int64_t prefix_cache_query_tokens = 0;
  std::int64_t last_seen = 0;       // liveness (REPLICA_UPDATED refreshes it)
  std::int64_t stats_reported = 0;  // last stats-bearing update
  // The pressure of one request (docs/ranking.md "Bookings", rule 3): the
  // common step of the positive pressures below 1 it reported, 0 = none yet,
  // < 0 = its pressure is not a request count; and how many distinct such
  // readings taught it (the step counts requests from kStepReadings on).
  double pressure_step = 0;
  std::uint32_t step_readings = 0;
  double last_step_reading = 0;
};

// (tenant, model): key count and the replicas' stats.
struct TmRec {
  std::uint32_t tenant = kNone, model = kNone;
  std::int64_t key_count = 0;
  std::uint32_t domain_count = 0;
  std::uint32_t in_tenant = 0;  // its place in its TenantRec::tms (O(1) removal)
  std::vector<StatsRec> stats;
  bool live = false;
};

struct ScopeMember {
  std::uint32_t replica;
  std::uint32_t entries;
};
// Load-aware ranking: the decayed count of hints answered with `replica` on top
// (docs/ranking.md "Load-aware cost"). Holds an interner reference to the replica.
struct LoadRec {
  std::uint32_t replica;
  double hints;
};
struct ScopeRec {
  std::uint32_t tm = kNone, scheme = kNone;
  std::uint32_t domain_count = 0;
  std::vector<ScopeMember> members;  // sorted by replica name, bytewise
  std::vector<LoadRec> loads;        // unsorted; few replicas per scope
  WorkState work;                    // work-aware bookings and rates (soft state)
  bool live = false;
};

struct TenantRec {
  std::int64_t key_count = 0;
  // Its (tenant, model) records (indexes into tms), in no order (a removal
  // moves the last into the gap): for a look at all of a tenant's models
  // (Shard::for_each_reporter_any_model) without scanning the shard.
  std::vector<std::uint32_t> tms;
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
  // The tenant's key ids while `listed` (tenant_keys.cc, docs/index.md
  // "Layout and memory"): kept only for a tenant small next to its shard and
  // within the shard's budget of listed ids. A removal leaves its id in place
  // until the next compaction, so readers keep the ids of live keys of this
  // tenant and drop duplicates (a removed id reused by the same tenant).
  std::vector<std::uint32_t> key_list;
  bool listed = false;
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

// The tables of one shard (data only; the plumbing is in records.cc).
struct Records {
  // --- interned names ---
  Interner tenants, models, schemes, adapters, replicas;

  // --- records ---
  Slab<KeyRec> keys;
  Slab<SpillRec> spills;
  std::vector<std::string> long_hashes;
  std::vector<std::uint32_t> long_free;
  KeyTable key_table;

  std::unordered_map<DomainKey, std::uint32_t, DomainKeyHash> domain_ids;
  std::vector<DomainRec> domains;
  std::vector<std::uint32_t> domain_free;

  std::unordered_map<std::uint64_t, std::uint32_t> tm_ids;  // tenant<<32|model
  std::vector<TmRec> tms;
  std::vector<std::uint32_t> tm_free;

  std::unordered_map<std::uint64_t, std::uint32_t> scope_ids;  // tm<<32|scheme
  std::vector<ScopeRec> scopes;
  std::vector<std::uint32_t> scope_free;

  std::vector<TenantRec> tenant_recs;       // by tenant id
  std::vector<std::int64_t> model_keys;     // by model id
  std::vector<std::string> drained_models;  // report 0 once
  // mutable: collect_snapshot() makes stale `newest` values exact again.
  mutable std::unordered_map<std::uint64_t, TenantReplicaRec> tenant_replicas;
  // The member index scope_add() matched last (records.cc): the entries of
  // one update join one scope as one replica. A hint only, used when that
  // slot of the scope's members holds the replica (members are unique).
  std::size_t scope_add_hint = 0;
  // The row tenant_replica_* used last (records.cc), nullptr = none.
  TenantReplicaRec* tenant_replica_last = nullptr;
  std::uint64_t tenant_replica_last_id = 0;

  // The capacity of every listed tenant's key_list, in ids (their budget).
  std::size_t listed_ids = 0;

  std::int64_t entry_total = 0;
  std::int64_t key_total = 0;
  std::size_t stats_total = 0;      // StatsRecs in every TmRec::stats
  std::uint64_t stats_refused = 0;  // new stats entries refused at the bounds
  std::int64_t unpublished = 0;     // entry delta not yet added to globals
};

}  // namespace ic::index::detail
