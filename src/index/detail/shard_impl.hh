#pragma once
// Internal state of index::Shard (not part of the public API): the parts
// each file needs, composed into Shard::Impl, and its operations grouped by
// the file that implements them. Records and tables: detail/records.hh;
// cap, quota and TTL state: detail/eviction_state.hh; lookup scratch and the
// per-call state: detail/lookup_state.hh.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "index/detail/eviction_state.hh"
#include "index/detail/lookup_state.hh"
#include "index/detail/pd_state.hh"
#include "index/detail/records.hh"
#include "index/shard.hh"

namespace ic::index {

namespace detail {

// The names of the last lookup that found its domain, by their ids, and the
// tenant's policy (lookup.cc): a repeated (tenant, model, scheme, adapter)
// skips the four name hashes, the three id probes and the policy probe.
// Valid while the domain slot still holds `k` (a removed domain's slot is
// reset) and set_policies() has not run since (it clears `policy`).
struct NameCache {
  std::uint32_t domain = kNone;
  DomainKey k{};
  const config::CachePolicy* policy = nullptr;
};

// Change reporting (changes.cc): the installed sink, if any.
struct ChangeReports {
  ChangeSink* sink = nullptr;
  bool quiet_removals = false;  // ALL_CLEARED reports itself, not each entry
};

}  // namespace detail

struct Shard::Impl : detail::Records,
                     detail::EvictionState,
                     detail::LookupScratch,
                     detail::PdScratch,
                     detail::ChangeReports {
  Impl(IndexConfig c, IndexGlobals* g, std::shared_ptr<const config::PolicySet> p);
  ~Impl();

  // --- configuration / shared state ---
  IndexConfig cfg;
  std::unique_ptr<IndexGlobals> own_globals;
  IndexGlobals* globals;
  std::shared_ptr<const config::PolicySet> policies;
  // group_hash's seed: IndexConfig::key_seed, or drawn when the shard is made.
  std::uint64_t key_seed;
  detail::NameCache name_cache;
  std::vector<std::uint32_t> event_keys;   // PREFIX_EVICTED's keys (events.cc scratch)
  std::vector<std::uint32_t> tenant_keys;  // ALL_CLEARED's and the quota's keys (scratch)
  std::vector<std::uint64_t> chain_keys;   // key hashes of a chain (ingest.cc, lookup.cc)

  // ===== key / record plumbing (records.cc) =====
  // The KeyTable hash of (tenant-model id, prefix hash bytes) under this
  // shard's seed.
  std::uint64_t group_hash(std::uint32_t tm, std::string_view bytes) const {
    return detail::group_hash(key_seed, tm, bytes);
  }
  // The same for many keys of one tenant-model (a chain's blocks).
  detail::GroupHasher group_hasher(std::uint32_t tm) const { return {key_seed, tm}; }
  std::string_view key_bytes(const detail::KeyRec& k) const {
    if (k.entry.hash_len == detail::kLongHash) return long_hashes[k.hash];
    return {reinterpret_cast<const char*>(&k.hash), k.entry.hash_len};
  }
  // The KeyTable hash of live key `k` (recomputed: the table stores no hashes).
  std::uint64_t key_hash(std::uint32_t k) const {
    const detail::KeyRec& kr = keys[k];
    return group_hash(domains[kr.domain].tm, key_bytes(kr));
  }
  // Calls put(key_hash(k), k) for every live key, in key order (KeyTable growth).
  void each_key_hash(auto&& put) const {
    const std::uint32_t hw = keys.high_water();
    for (std::uint32_t k = 0; k < hw; ++k) {
      if (keys[k].live()) put(key_hash(k), k);
    }
  }
  // Starts the reads a probe of `h` will make: prefetch_slot() first, then,
  // a few blocks later, prefetch_key() (the records of the first `run` keys
  // of its probe run, both cache lines a 40-byte record may span). A chain walk (ingest,
  // lookup) overlaps the two dependent misses of each block with other blocks.
  void prefetch_slot(std::uint64_t h) const { key_table.prefetch(h); }
  void prefetch_key(std::uint64_t h, int run = 1) const {
    key_table.prefetch_run(h, run, [this](std::uint32_t k) {
      const char* p = reinterpret_cast<const char*>(&keys[k]);
      __builtin_prefetch(p);
      __builtin_prefetch(p + sizeof(detail::KeyRec) - 1);
    });
  }
  // Inline: this is the innermost comparison of every probe.
  bool key_bytes_equal(const detail::KeyRec& k, std::string_view bytes) const {
    const std::uint8_t len = k.entry.hash_len;
    if (len == detail::kLongHash) return long_hashes[k.hash] == bytes;
    if (len != bytes.size()) return false;
    std::uint64_t v = 0;
    if (!bytes.empty()) __builtin_memcpy(&v, bytes.data(), bytes.size() < 8 ? bytes.size() : 8);
    return v == k.hash;
  }
  // Key of (domain, bytes) or kNone. No allocation.
  std::uint32_t find_key(std::uint32_t domain, std::string_view bytes) const;
  // Same with the key hash precomputed (h = group_hash(tm of domain, bytes));
  // on a miss the key table's empty slot for it goes to `hole` if set
  // (create_key). Inline: every block of a chain lookup and of an ingest
  // probes once.
  std::uint32_t find_key_hashed(std::uint32_t domain, std::uint64_t h, std::string_view bytes,
                                std::size_t* hole = nullptr) const {
    const std::uint32_t k = key_table.find(
        h,
        [&](std::uint32_t x) {
          const detail::KeyRec& kr = keys[x];
          return kr.domain == domain && key_bytes_equal(kr, bytes);
        },
        hole);
    return k == detail::KeyTable::kNoKey ? detail::kNone : k;
  }
  // Entry of `replica` in key `k` or kNone.
  std::uint32_t find_entry(std::uint32_t k, std::uint32_t replica) const;

  // ===== entries by handle (detail/records.hh kSpill) =====
  detail::EntryFields& entry(std::uint32_t e) {
    return (e & detail::kSpill) != 0 ? spills[e & ~detail::kSpill].entry : keys[e].entry;
  }
  const detail::EntryFields& entry(std::uint32_t e) const {
    return (e & detail::kSpill) != 0 ? spills[e & ~detail::kSpill].entry : keys[e].entry;
  }
  std::uint32_t entry_key(std::uint32_t e) const {
    return (e & detail::kSpill) != 0 ? spills[e & ~detail::kSpill].key : e;
  }
  // The key's entries: the inline one (if taken), then its SpillRecs.
  std::uint32_t first_entry(std::uint32_t k) const {
    const detail::KeyRec& kr = keys[k];
    if (kr.entry.replica != detail::kNone) return k;
    return kr.spill == detail::kNone ? detail::kNone : kr.spill | detail::kSpill;
  }
  std::uint32_t next_entry(std::uint32_t e) const {
    const std::uint32_t s =
        (e & detail::kSpill) != 0 ? spills[e & ~detail::kSpill].next : keys[e].spill;
    return s == detail::kNone ? detail::kNone : s | detail::kSpill;
  }
  // Entry slots in handle order (sweep, export, victim scans): every key
  // slot's inline entry, then every SpillRec. entry_slot_from(e) = the first
  // slot at or after handle `e`; past the end when entry_slots_done().
  std::uint32_t entry_slot_from(std::uint32_t e) const {
    return (e & detail::kSpill) == 0 && e >= keys.high_water() ? detail::kSpill : e;
  }
  bool entry_slots_done(std::uint32_t e) const {
    return (e & detail::kSpill) != 0 && (e & ~detail::kSpill) >= spills.high_water();
  }
  bool entry_live(std::uint32_t e) const { return entry(e).replica != detail::kNone; }

  std::uint32_t find_domain(std::string_view tenant, std::string_view model,
                            std::string_view scheme, std::string_view adapter) const;
  // The same with the names' ids (kNone: an unknown name, no domain).
  std::uint32_t find_domain(const detail::DomainKey& k) const;
  std::uint32_t find_tm(std::uint32_t tenant, std::uint32_t model) const;
  std::uint32_t find_scope(std::uint32_t tm, std::uint32_t scheme) const;

  std::uint32_t get_or_create_domain(std::string_view tenant, std::string_view model,
                                     std::string_view scheme, std::string_view adapter);
  std::uint32_t get_or_create_tm(std::uint32_t tenant, std::uint32_t model);
  // New key of (domain, bytes); `h` = its group hash, `hole` = the slot the
  // caller's probe (find_key_hashed) ended on, the table unchanged since.
  std::uint32_t create_key(std::uint32_t domain, std::string_view bytes, std::uint64_t h,
                           std::size_t hole);
  std::uint32_t create_entry(std::uint32_t k, std::uint32_t replica);

  void remove_entry(std::uint32_t e);  // cascades to key/domain/tm/tenant
  // Unlinks entry `e` from its key and frees its slot.
  void free_entry(std::uint32_t e);
  void remove_key_record(std::uint32_t k);
  void remove_domain(std::uint32_t d);
  void maybe_remove_tm(std::uint32_t tm);
  void scope_add(std::uint32_t scope, std::uint32_t replica);
  void scope_sub(std::uint32_t scope, std::uint32_t replica);
  // The (tenant << 32 | replica) row of tenant_replicas, or nullptr.
  detail::TenantReplicaRec* find_tenant_replica(std::uint64_t id);
  void tenant_replica_add(std::uint32_t tenant, std::uint32_t replica, std::int64_t seen);
  void tenant_replica_sub(std::uint32_t tenant, std::uint32_t replica, std::int64_t seen);
  // An existing entry's last_seen changed from `from` to `to`.
  void tenant_replica_seen(std::uint32_t tenant, std::uint32_t replica, std::int64_t from,
                           std::int64_t to);
  detail::TenantRec& tenant_rec(std::uint32_t tenant);
  // ===== per-tenant key lists (tenant_keys.cc) =====
  // Fills `tenant_keys` with the tenant's live key ids, ascending: from its
  // list, else one pass over the shard's key slots (which lists the tenant
  // again when it is small enough and the budget allows).
  void collect_tenant_keys(std::uint32_t tenant);
  // Notes new key `k` of `tenant` in its list (create_key).
  void list_key(std::uint32_t tenant, std::uint32_t k);
  // True when a tenant of `tenant_keys` keys may hold a list that grows by
  // `more_ids` ids.
  bool may_list(std::int64_t tenant_key_count, std::size_t more_ids) const;
  // Frees the tenant's list (it stops being listed).
  void unlist(detail::TenantRec& t);
  // Keeps the list's ids of live keys of `tenant`, ascending, once each.
  void compact_key_list(detail::TenantRec& t, std::uint32_t tenant);
  void refresh_tenant_policy(std::uint32_t tenant);
  std::int64_t ttl_of(std::uint32_t tenant) const;
  std::int64_t ttl_for_policy(const config::CachePolicy& p) const;

  // Recomputes TenantReplicaRec::newest where it is only an upper bound.
  void refresh_stale_newest() const;
  // Publishes the entry delta to the globals; returns the new global total.
  std::int64_t publish();

  // ===== eviction (evict.cc) =====
  // The LFU part of entry `e`'s cap order (its access count on LFU tenants, else 0).
  std::uint32_t order_a(std::uint32_t e) const;
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
  void invalidate_victims();

  // ===== ingest (ingest.cc) =====
  IngestResult ingest(const Update& u, std::int64_t now);
  // Ingests one reported prefix into `domain` (chain blocks and/or the exact key).
  void ingest_prefix(std::uint32_t domain, const PrefixReport& p, std::int64_t seen,
                     std::uint32_t replica, IngestResult& r);
  // Upserts (domain, bytes) with key hash `h` = group_hash(tm of domain, bytes).
  void upsert(std::uint32_t domain, std::string_view bytes, std::uint64_t h, std::int32_t tokens,
              std::int64_t seen, std::uint8_t tier, std::uint32_t replica, IngestResult& r);
  // Stores `replica_ref`'s stats for (tenant, model) `tm`; returns the
  // requests its pressure counts (running + waiting), -1 while that is
  // unknown; nullopt when a new entry would pass IndexConfig's stats bounds
  // (nothing stored, counted in stats_refused).
  std::optional<std::int64_t> apply_stats(std::uint32_t tm, std::uint32_t replica_ref,
                                          const ReplicaStats& s, std::int64_t seen);
  // Step 5 of an ingest: the update's stats within the bounds, then the
  // bookings they settle (an idle report settles them even when its stats
  // were refused). Returns the tenant of the (tenant, model) record holding
  // them, kNone when none does.
  std::uint32_t ingest_stats(const Update& u, std::uint32_t replica, std::int64_t seen,
                             std::int64_t now);
  // The tenant quota, then the global cap, after an ingest into `tenant`.
  void settle_ingest(std::uint32_t tenant, IngestResult& r);

  // ===== events (events.cc, docs/index.md "Events") =====
  std::size_t apply_event(const Event& ev, std::int64_t now);
  std::size_t evict_prefix(const Event& ev, std::uint32_t tm, std::uint32_t replica);
  void refresh_replica(const Event& ev, std::uint32_t tm, std::uint32_t replica, std::int64_t now);
  std::size_t clear_replica(const Event& ev, std::uint32_t tenant, std::uint32_t model,
                            std::uint32_t replica);

  // ===== expiry and GetCacheState (expiry.cc, cache_state.cc) =====
  bool sweep_slice(std::int64_t now, std::size_t budget);
  // Removes the stats entries whose liveness is older than the tenant's TTL.
  void expire_stats(std::int64_t now);
  void get_cache_state(const CacheStateQuery& q, CacheState* out) const;
  void for_each_reporter(std::string_view tenant, std::string_view model, std::size_t max_visits,
                         const Shard::ReporterFn& fn) const;
  void for_each_reporter_any_model(std::string_view tenant, std::size_t max_visits,
                                   const Shard::ReporterFn& fn) const;
  // Visits the stats replicas of `tm` while `*budget` lasts (one a visit) and
  // `fn` says go on; false once it said stop or the budget ran out.
  bool visit_reporters(const detail::TmRec& tm, std::size_t* budget,
                       const Shard::ReporterFn& fn) const;
  // The export/GetCacheState view of one stats entry of (tenant, model) `tm`.
  StatsView stats_view(const detail::TmRec& tm, const detail::StatsRec& r) const;

  // ===== load-aware ranking (ranking.cc with step 12, docs/ranking.md) =====
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
  // ===== work-aware ranking (work_ranking.cc with step 12, docs/ranking.md) =====
  // Step 12 for a work-aware tenant: ranks the holders (stored and booked) and,
  // with affinity routing, every other replica known in the scope by the
  // estimated wait until the request's first token. True when the answer is
  // complete (AFFINITY_HINT, or NO_HINT for a miss with fewer than two known
  // replicas); otherwise `scored` holds the PREFIX_MATCH holders with their
  // scores (st.outcome kPrefixMatch), or nothing (kNone).
  bool rank_by_work(detail::LookupState& st);
  // The next replica_scratch stamp (the scratch sized to the interner).
  std::uint32_t next_stamp();
  // The work-aware preparation both LookupRoute and LookupPDRoute run: ends
  // the bookings of `ws` (nullptr: the scope is unknown) past their bound and
  // adds the request's booked holders to `scored`. Returns this call's stamp.
  std::uint32_t begin_work(detail::LookupState& st, detail::WorkState* ws);
  // The request's prompt tokens: its effective tokens, never less than the deepest match.
  double prompt_tokens(const detail::LookupState& st) const;
  // Stamps the fresh pressures of (tenant, model) and the work records of
  // `ws` (nullptr: none) into replica_scratch. True when some replica
  // reported stats for (tenant, model) lately.
  bool stamp_work_state(const detail::LookupState& st, const detail::WorkState* ws,
                        std::uint32_t stamp);
  // The one cost of docs/ranking.md "Cost": appends `replica` to work_cands
  // with wait = its queued booked work + (prompt − matched × fresh) / its rate.
  // `holder`: its index in `scored`, or kNone.
  void add_work_cand(const detail::LookupState& st, const detail::WorkState* ws,
                     std::uint32_t replica, std::uint32_t holder, std::int64_t matched,
                     double fresh, double prompt, double saturation, std::uint32_t stamp);
  // The rendezvous seed of the request (XXH3 of the chain's hashes or of the exact key).
  std::uint64_t prompt_seed(const detail::LookupState& st) const;
  // Without stats, the least time between two NO_HINT probes of a scope that
  // has no earned probes left, µs: 4 × its longest mean completion time, or
  // the first booking bound before one is timed; doubled by each probe in a
  // row that found none, at most 5 minutes.
  std::int64_t discovery_window(const detail::WorkState& ws) const;
  // Without stats, whether a scope that knows `known` replicas (0: cannot
  // count them) answers NO_HINT at `now` (wall µs) to a request an unseen
  // idle replica would serve no later: its first probe; one from the budget
  // its found replicas earned (kept until spent); or one per
  // discovery window. Updates ws's record.
  bool take_probe(detail::WorkState& ws, std::size_t known, std::int64_t now) const;
  // The request's key hashes into work_keys: every chain block's, or the exact key's.
  void hash_request(const detail::LookupState& st);
  // True when a live booking of `ws` starts with the request's first key
  // (one key hashed; match_bookings then needs the whole request's).
  bool booked_first(const detail::LookupState& st, const detail::WorkState& ws) const;
  // Sets replica_scratch[r].spec_matched (stamp) to the longest leading run of
  // the request a live booking of `ws` holds on r, in the request's tokens,
  // and booked_slots to the matching bookings' slots.
  void match_bookings(const detail::LookupState& st, const detail::WorkState& ws,
                      std::uint32_t stamp);
  // Adds the replicas holding the request only through bookings to `scored`
  // and raises stored holders whose booked run is longer (matched-tokens floor applied).
  void add_booked_holders(detail::LookupState& st, std::uint32_t stamp);
  // Fills work_cands: the holders in `scored`, then (affinity routing) every
  // other replica known in the scope: members, fresh stats reporters and work
  // records. True when some replica reported stats for (tenant, model) lately.
  bool gather_work_candidates(const detail::LookupState& st, const detail::WorkState& ws,
                              double prompt, double saturation, std::uint32_t stamp);
  // The cheapest candidate by cost = queued + own_weight × (wait − queued), µs
  // (own_weight in [0.1, 1]: the request's own uncached prefill against the queue,
  // docs/ranking.md "Cost"); among equal costs the rendezvous winner for the prompt.
  // work_cands must not be empty; the reference lives until the next gather.
  const detail::WorkCand& pick_work(const detail::LookupState& st, double own_weight) const;
  // Books the answered replica: the request's uncached tokens and blocks, and
  // its predicted hit tokens (build_result, rank_by_work).
  void book_answer(detail::LookupState& st, const detail::Scored& top);

  // ===== bookings and learned rates (bookings.cc, docs/ranking.md "Bookings") =====
  // A replica's prefill rate, tokens/s: learned, else the scope's prior.
  double rate_of(const detail::WorkState& ws, const detail::ReplicaWork& w) const;
  // The rate of a replica `ws` has not timed, tokens/s: the mean learned rate of
  // its replicas, else the knob (no scope, or none learned).
  double prior_rate(const detail::WorkState* ws) const;
  // One timed prefill of `tokens` that took `took_us` (µs) joins `w`'s learned
  // rate (a decaying window of completions); nothing when either is ≤ 0.
  void learn_rate(detail::WorkState& ws, detail::ReplicaWork& w, double tokens,
                  std::int64_t took_us);
  // Recomputes ws.prior_rate after a learned rate changed or a record went.
  static void update_prior_rate(detail::WorkState& ws);
  // The scope's work record of `replica` (created, with an interner reference).
  detail::ReplicaWork& work_of(detail::WorkState& ws, std::uint32_t replica, std::int64_t now);
  detail::ReplicaWork* find_work(detail::WorkState& ws, std::uint32_t replica);
  // Books `tokens` and the key hashes `keys` (a chain's, or one exact key) on `replica`.
  detail::Booking& book(detail::WorkState& ws, std::uint32_t replica, std::int64_t now,
                        std::int64_t tokens, bool chain, std::span<const std::uint64_t> keys);
  // Frees booking `b` (counted completed or expired on its replica).
  void end_booking(detail::WorkState& ws, detail::Booking& b, bool completed);
  // Ends the bookings past their bound; forgets idle work records.
  void expire_work(detail::WorkState& ws, std::int64_t now);
  // Ingest: `replica` reported the chain of key hashes `chain` (positions from
  // block 0), or the one key `key`: marks the bookings it completes, and ends
  // (end_elsewhere) the bookings of the same prompt on other replicas.
  void note_stored_chain(detail::WorkState& ws, std::uint32_t replica,
                         std::span<const std::uint64_t> chain, std::int64_t now);
  void note_stored_key(detail::WorkState& ws, std::uint32_t replica, std::uint64_t key,
                       std::int64_t now);
  // Ends booking `b`, whose prompt another replica reported stored (the
  // gateway sent it there), and takes its tokens off its replica's queue.
  void end_elsewhere(detail::WorkState& ws, detail::Booking& b, std::int64_t now);
  // After an ingest of `replica` into `scope`: ends the completed bookings
  // (and the older ones they overtook), learns the rate and the bound, and
  // re-estimates the replica's queue. `new_blocks`: the report stored new entries.
  void settle_stored(std::uint32_t scope, std::uint32_t replica, std::int64_t now, bool new_blocks);
  // After ReplicaStats of `replica` with pressure 0 (nothing running or
  // waiting, reported at `seen`, wall µs) sent for `scope` (kNone: no such
  // scope, nothing to do): ends its bookings there made more than
  // kIdleGraceUs before, and re-times its queue.
  void settle_idle(std::uint32_t scope, std::uint32_t replica, std::int64_t seen, std::int64_t now);
  // After ReplicaStats of `replica` whose pressure counts `requests` (> 0)
  // running or waiting at `seen` (wall µs), sent for `scope` (kNone: nothing
  // to do): of its bookings there made more than kIdleGraceUs before, at most
  // `requests` are queued, the oldest others are displaced; with fewer, it
  // takes displaced bookings of the scope (newest first) for the difference.
  void settle_count(std::uint32_t scope, std::uint32_t replica, std::int64_t requests,
                    std::int64_t seen, std::int64_t now);
  // Ends the queue floor of `replica`'s unbooked requests in `scope` (kNone:
  // nothing to do) at wall µs `now`: its queue is again its own bookings'
  // work. A decode-only replica's count is not of prefill requests.
  void clear_unbooked(std::uint32_t scope, std::uint32_t replica, std::int64_t now);
  // Takes booking `b` off its replica's queue and speculative entries (its
  // replica's count left it out) and places it on the replica with the most
  // unbooked requests, if any.
  void displace(detail::WorkState& ws, detail::Booking& b, std::int64_t now);
  // Books displaced `b` on `w` (one of w's unbooked requests).
  void place_displaced(detail::WorkState& ws, detail::Booking& b, detail::ReplicaWork& w,
                       std::int64_t now);
  // Drops the scope's bookings and work records (scope removal).
  void clear_work(detail::WorkState& ws);
  // Bookings made by this shard (the last one's seq); the booking the last
  // lookup made (Shard::last_booking).
  std::uint64_t booking_seq = 0;
  BookingRef last_booking;

  // ===== gateway feedback (feedback.cc, docs/ranking.md "Feedback") =====
  // The live booking `ref` names; nullptr when it ended.
  detail::Booking* find_booking(BookingRef ref);
  void feedback(const BookingFeedback& f, std::int64_t now);
  // kServedBy: moves `b` to the replica named `name` (see BookingFeedback).
  void move_booking(detail::WorkState& ws, detail::Booking& b, std::string_view name,
                    std::int64_t held, std::int64_t now);
  // kFirstByte: `b`'s prefill is done; its replica's rate learns from it.
  void prefill_done(detail::WorkState& ws, detail::Booking& b, std::int64_t now);

  // Entries the current ingest created (upsert), for settle_stored.
  std::uint32_t ingest_new_entries = 0;
  std::int64_t ingest_now = 0;  // the current ingest's wall µs (bookings it ends elsewhere)

  // ===== LookupPDRoute (pd_route.cc, decode_bookings.cc, docs/pd-routing.md) =====
  void lookup_pd(const LookupQuery& q, std::string_view ref, const LookupContext& ctx,
                 PdResult* out);
  // Re-resolves the pools of the installed policy set's topologies (set_policies).
  void resolve_pd_pools();
  // Whether `replica` is in a decode pool and in no prefill pool of the
  // topologies in force (binary search): its pressure counts its decodes.
  bool decode_only(std::uint32_t replica) const;
  // Fills decode_cands from `pools` (work records stamped with `stamp`).
  void gather_decode_candidates(const detail::LookupState& st, const detail::WorkState* ws,
                                const detail::PdPools& pools, double prompt, double saturation,
                                std::uint32_t stamp);
  // The candidate of least `cost(c)` among those `eligible` accepts; equal
  // costs: the deeper hold, then the rendezvous winner of the prompt.
  const detail::DecodeCand* pick_decode(const detail::LookupState& st, auto cost,
                                        auto eligible) const;
  // pick_decode among the eligible replicas with a free slot; when none has
  // one, among all the eligible (the decode waits for a slot).
  const detail::DecodeCand* pick_free_first(const detail::LookupState& st, auto cost,
                                            auto eligible) const;
  // The prefill candidates of `pools` (work_cands, prefill_pool_index): the
  // unsaturated ones (all when every one is saturated) that have a decode
  // replica `pairs` accepts in the required domain.
  void gather_prefill_candidates(const detail::LookupState& st, const detail::WorkState* ws,
                                 const detail::PdPools& pools, double prompt, double saturation,
                                 std::uint32_t stamp, auto pairs);
  // Books decode slot and speculative blocks of a pair's (or decode-only) answer.
  // The slot is taken from `start_us` after the answer (the prefill's
  // estimated wait) for `hold_us`.
  void book_decode(detail::LookupState& st, std::uint32_t replica, std::int64_t start_us,
                   std::int64_t hold_us);
  // Frees decode bookings of `replica` in the scopes of `tm`: those whose key
  // is `key`, or every one when `all`. (PREFIX_EVICTED, ALL_CLEARED.)
  void release_decodes(std::uint32_t tm, std::uint32_t replica, std::uint64_t key, bool all);
  // True when `replica` has an open booking of exactly the request's blocks
  // (work_keys, hashed): a second speculative hold would add nothing.
  bool holds_booking(const detail::WorkState& ws, std::uint32_t replica, bool chain) const;
  // Ends the decode bookings of `ws` past their bound.
  void expire_decodes(detail::WorkState& ws, std::int64_t now);
  void end_decode(detail::WorkState& ws, detail::DecodeBooking& b);

  // ===== change reports (changes.cc; only called when `sink` is set) =====
  Change prefix_change(ChangeType type, std::uint32_t e) const;
  void report_upsert(std::uint32_t e);
  void report_removal(std::uint32_t e);
  void report_replica(ChangeType type, std::uint32_t tm, std::uint32_t replica, std::int64_t seen);
  void report_cleared(const Event& ev);

  // ===== lookup (docs/lookup.md steps 0–13) =====
  // lookup.cc, steps 0–11: the steps in order.
  void lookup(const LookupQuery& q, const LookupContext& ctx, LookupResult* out);
  // Steps 0 (after the clock and policy), 2–11 on `st` (its ranking flags set):
  // false when a gate answered (`st.out` complete: TIMEOUT,
  // POLICY_REQUIRES_CHAIN, NO_HINT); else `scored` and `st.outcome` hold the
  // match for step 12. Shared by LookupRoute and LookupPDRoute.
  bool run_match_steps(detail::LookupState& st, bool cached);
  // The clock a call reads: the context's, else the system clock.
  static Clock& clock_of(const LookupContext& ctx);
  // Step 5: false = no usable input (NO_HINT).
  bool resolve_input(detail::LookupState& st);
  // token_ids → the fingerprint chain with the engine block size; false = fail open.
  bool resolve_tokens(detail::LookupState& st);
  // What the matchers share. `cached`: the query's names are name_cache's.
  void find_scope_of(detail::LookupState& st, bool cached) const;
  // True when name_cache holds the query's four names (ids still live).
  bool names_cached(const LookupQuery& q) const;
  // Remembers the names of a lookup that found its domain.
  void remember_names(const detail::LookupState& st);
  double pressure_factor(const detail::LookupState& st, std::uint32_t replica) const;
  double holder_score(const detail::LookupState& st, std::uint32_t replica, std::int64_t matched,
                      double fresh) const;
  detail::Outcome classify_miss(const detail::LookupState& st) const;
  // Step 7 for a chain: longest leading run per replica.
  void match_chain(detail::LookupState& st);
  void start_chain_run(const detail::LookupState& st);
  void extend_chain_runs(std::uint32_t domain, std::int64_t now, std::int64_t ttl);
  void set_run_tokens();
  void score_chain_runs(const detail::LookupState& st);
  // Step 7 for one key, then TENANT_HOT on a miss.
  void match_exact(detail::LookupState& st);
  void match_tenant_hot(const detail::LookupState& st);
  // Steps 8–11.
  void apply_gates(detail::LookupState& st);
  // ranking.cc, step 12 and its load-aware counterpart (docs/ranking.md):
  // true when the answer is AFFINITY_HINT (then `st.out` is complete).
  bool rank_by_load(detail::LookupState& st);
  bool affinity_hint(detail::LookupState& st);
  // ranking.cc, step 13.
  void credit_lfu(const detail::LookupState& st);
  void build_result(detail::LookupState& st);
  void finish(detail::LookupState& st, std::string_view code, bool echo_adapter) const;

  // match_bookings' scratch: the slots it matched, ascending. Last, so the
  // members the chain walk reads keep their offsets (LookupScratch's layout).
  std::vector<std::uint32_t> booked_slots;
};

}  // namespace ic::index
