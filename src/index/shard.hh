#pragma once
// One core's partition of the cache index (docs/index.md, docs/lookup.md).
//
// A Shard owns the whole state of the tenants hashed to its core
// (partition.hh owner_core) and is single-threaded: only its core calls it.
// It is pure and I/O-free: every clock reading comes from the caller (Clock,
// now_wall_us). The only state shared between shards is IndexGlobals (atomics,
// relaxed), used for the global entry cap and the cold-start carve-out.
//
// Wiring (service layer): create one IndexGlobals, then one Shard per core
// with a pointer to it; route every call of tenant T to owner_core(T, cores);
// broadcast each new PolicySet with set_policies() to every shard; run
// sweep_slice() from a timer in bounded slices.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/policy.hh"
#include "index/cache_state.hh"
#include "index/change.hh"
#include "index/clock.hh"
#include "index/pd_query.hh"
#include "index/query.hh"
#include "index/snapshot.hh"
#include "index/update.hh"

namespace ic::index {

// Server-level knobs of the index (docs/lookup.md "Defaults", docs/index.md).
struct IndexConfig {
  std::int64_t default_ttl_us = 30LL * 60 * 1'000'000;  // entry TTL without a policy TTL
  std::int64_t max_entries = 1'000'000;  // global cap on (key, replica) entries, all shards
  // Global-cap slack across shards (docs/hostile-peers.md "Global cap"): a
  // shard evicts its own oldest entry when it is at most cap_slack_us newer
  // than the oldest published by any other shard; entries over the cap that
  // wait for an older shard are at most cap_slack_entries (≤ 0: max(16,
  // max_entries / 1024)), past which the crossing shard evicts its own.
  std::int64_t cap_slack_us = 1'000'000;
  std::int64_t cap_slack_entries = 0;
  std::int32_t engine_block_size = 16;   // tokens per block for token_ids / prompt_text
  double pressure_weight = 1.0;          // pressure_factor = clamp(1 − w × pressure, 0, 1)
  std::int32_t slo_tight_ttft_ms = 200;  // SLO is tight when 0 < ttft_ms < this
  double slo_bias = 1.0;                 // slo_bias = 1 + fresh × bias when tight
  std::int64_t tenant_hot_window_us = 5LL * 60 * 1'000'000;  // 0 disables TENANT_HOT
  double tenant_hot_min_hit_rate = 0.1;  // TENANT_HOT candidates need hit_rate ≥ this
  // Stats entries, one per (tenant, model, replica) whose updates carry stats
  // (docs/index.md "Ingest" step 5): at most max_stats_per_model per (tenant,
  // model) and max_stats_entries per shard. Stats of a replica new to its
  // (tenant, model) past either bound are refused (Shard::stats_refused), the
  // rest of its update applied; stats already held keep being refreshed.
  std::size_t max_stats_per_model = 4'096;
  std::size_t max_stats_entries = 65'536;
  std::size_t max_token_ids = 1'048'576;   // more token_ids → fail-open NO_HINT
  std::size_t max_prompt_bytes = 1 << 20;  // longer prompt_text → fail-open NO_HINT
  // Ranking of tenants whose policy does not choose one (`--ranking`, docs/ranking.md).
  config::Ranking ranking = config::Ranking::kWorkAware;
  // Load-aware knobs of tenants whose policy leaves them out (docs/ranking.md "Knobs"):
  // 512 prefill tokens per recent hint, a 64-hint memory, pressure 1.0 = 16 hints,
  // saturated at pressure ≥ 1.0. All must be ≥ 0 (load_window ≥ 1).
  config::LoadAwareKnobs load_aware{512.0, 64.0, 16.0, 1.0};
  // Work-aware knobs (docs/ranking.md "Knobs"): the prefill rate until one is learned, the
  // booking bound until a completion is timed, the weight of the request's own prefill.
  config::WorkAwareKnobs work_aware{};
  // Stats younger than this make a replica a load-aware or work-aware candidate and its
  // pressure count; a replica's work record idle this long is forgotten.
  std::int64_t load_stats_window_us = 5LL * 60 * 1'000'000;
  // Seed of the key table's hash; 0 = each shard draws its own from the
  // system's random source, so no peer can choose prefix hashes that share a
  // probe run (docs/hostile-peers.md "Key table seed"). Tests and benchmarks
  // may fix it.
  std::uint64_t key_seed = 0;
};

// State shared by all shards of one server. Create once, outlive the shards.
//
// The global cap (docs/index.md "Global cap") across shards, without locks
// and off the lookup path (docs/hostile-peers.md "Global cap"): every shard
// publishes its entry delta with one fetch_add at the end of each operation,
// and, once the index is near the cap, the last_seen of its own next cap
// victim in `oldest[slot]`. A shard whose ingest takes the total over the cap
// evicts its own victims while each is within cap_slack_us of the oldest any
// other shard published; the rest becomes `cap_debt` and the ingest names the
// shard holding the oldest entry (IngestResult::cap_handoff), which the
// service asks, on its own core, to pay the debt (Shard::pay_cap_debt). So
// the victims are the globally oldest within the slack whichever core
// crosses the cap, and the total stays ≤ cap + cap_slack_entries: a debt over
// that is evicted by the crossing shard itself.
struct IndexGlobals {
  static constexpr unsigned kMaxShards = 256;
  // Sum of every shard's (key, replica) entries (reserved tenant never stored).
  // Also read (relaxed) for the cold-start carve-out: 0 = "index globally empty".
  alignas(64) std::atomic<std::int64_t> total_entries{0};
  // Entries over the cap left for an older shard to evict.
  alignas(64) std::atomic<std::int64_t> cap_debt{0};
  // Shards registered (each takes the next slot at construction).
  std::atomic<unsigned> shard_count{0};
  // Per slot: last_seen (wall µs) of the shard's next cap victim; INT64_MAX
  // when it has none or has not published yet.
  struct alignas(64) Oldest {
    std::atomic<std::int64_t> last_seen{INT64_MAX};
  };
  Oldest oldest[kMaxShards];
};

// Per-call inputs of LookupRoute.
struct LookupContext {
  // Clock read at step 0 (unless start_mono_us ≥ 0), after input resolution,
  // after the index lookup and at the end (lookup_latency_us).
  Clock* clock = nullptr;
  // Monotonic µs when the call arrived (e.g. before a cross-core hop); < 0 →
  // read the clock at step 0. Latency is measured from here.
  std::int64_t start_mono_us = -1;
  // Absolute monotonic deadline in µs from the caller's grpc-timeout;
  // INT64_MAX = none. The tenant's lookupTimeoutMs tightens it.
  std::int64_t deadline_mono_us = INT64_MAX;
  // The request's token_ids were made from its prompt_text by the service
  // (docs/prompt-text.md): when they are the input resolved at step 5, the
  // response echoes them.
  bool token_ids_from_prompt = false;
};

// What one ReportCacheState message did (for ingest-rate metrics).
struct IngestResult {
  std::uint32_t entries_upserted = 0;  // (key, replica) upserts, new or refreshed
  std::uint32_t prefixes_dropped = 0;  // malformed chain entries / empty hash_scheme
  std::uint32_t evicted_cap = 0;       // entries evicted by the global cap after it
  std::uint32_t evicted_quota = 0;     // keys evicted by the tenant quota after it
  bool dropped_reserved = false;       // reserved tenant: nothing applied
  // Slot of the shard holding the globally oldest entry when this ingest left
  // entries over the cap for it (run Shard::pay_cap_debt there); -1: none.
  int cap_handoff = -1;
};

// What one Shard::pay_cap_debt call did.
struct CapPayment {
  std::uint32_t evicted = 0;  // entries evicted from this shard
  int handoff = -1;           // slot of an older shard to ask next; -1: none
};

// Evictions by (algorithm, reason) for inferencecache_index_evictions_total:
// one per (key, replica) entry. Algorithm = the tenant's policy eviction.
struct EvictionCounters {
  std::uint64_t lru_cap = 0;
  std::uint64_t lfu_cap = 0;
  std::uint64_t lru_ttl = 0;
  std::uint64_t lfu_ttl = 0;
};

// A booking of the work-aware ranking (docs/ranking.md "Bookings") as the
// lookup that made it names it (Shard::last_booking); seq 0 = none. Unique
// for the shard's life: feedback on a booking that has ended is ignored.
struct BookingRef {
  std::uint32_t scope = UINT32_MAX;
  std::uint64_t seq = 0;
  bool valid() const noexcept { return seq != 0; }
};

// What a gateway learned of the request a booking priced (docs/ranking.md
// "Feedback"): the endpoint picker's response side (gateway/picker.hh).
struct BookingFeedback {
  enum class Kind : std::uint8_t {
    // The request went to `replica_id` (the answer's choice among eligible
    // replicas, or the endpoint that served it): a booking of another replica
    // moves there, its work becomes prompt tokens − `held_tokens` (never
    // below 0; none once its first byte came) on that replica's queue.
    kServedBy,
    // Its first response byte came back: its prefill is done. Its tokens
    // leave the queue, the replica's rate learns tokens / (now −
    // max(booked, the replica's previous prefill end)) as from a completion,
    // and the replica's queue restarts from now. Its blocks stay speculative
    // entries until the engine's report or the bound.
    kFirstByte,
    // The request ended. Before a first byte (failed, cancelled, or never
    // sent: an answer the gateway did not give) the booking ends: its work
    // leaves the queue and its blocks stop being entries. After one, nothing
    // is left to release.
    kEnded,
  };
  Kind kind = Kind::kEnded;
  BookingRef booking;
  std::string_view replica_id;   // kServedBy
  std::int64_t held_tokens = 0;  // kServedBy: prompt tokens the replica holds (its matched_tokens)
};

class Shard {
 public:
  // `globals` must outlive the shard; nullptr → the shard owns a private one
  // (single-shard use: tests, benchmarks). `policies` nullptr → defaults.
  Shard(IndexConfig config, IndexGlobals* globals,
        std::shared_ptr<const config::PolicySet> policies = nullptr);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Installs a new policy snapshot; the next call sees it (a call in flight
  // never straddles two sets: calls are not re-entrant). Re-derives cached
  // per-tenant TTL/LFU/quota; does not evict by itself (quotas apply at the
  // tenant's next ingest, TTL at the next sweep).
  void set_policies(std::shared_ptr<const config::PolicySet> policies);
  const std::shared_ptr<const config::PolicySet>& policies() const;

  // ReportCacheState: ingests one CacheStateUpdate (docs/index.md "Ingest"):
  // timestamp_us 0 = now_wall_us; reserved tenant dropped; empty hash_scheme
  // drops prefixes but keeps stats; chain/legacy forms; tier and adapter rules;
  // stats with NaN/±Inf → 0; then the tenant quota, then the global cap.
  IngestResult ingest(const Update& update, std::int64_t now_wall_us);

  // PublishEvent (docs/index.md "Events"); timestamp_us 0 = now_wall_us.
  // PREFIX_EVICTED probes a (tenant, model, hash) map: no scan.
  // Returns the number of (key, replica) entries removed.
  std::size_t apply_event(const Event& event, std::int64_t now_wall_us);

  // LookupRoute, steps 0–13 of docs/lookup.md. Fills `out` completely
  // (clears it first; its views stay valid until this shard's next call).
  // Never fails. Side effects: LFU access credit (tenant on LFU, delivered
  // PREFIX_MATCH); under the load-aware ranking, the scope's hint count of the
  // answered replica (docs/ranking.md "Load-aware cost"); under the work-aware
  // ranking, a booking of the answered replica (docs/ranking.md "Bookings").
  void lookup(const LookupQuery& query, const LookupContext& ctx, LookupResult* out);
  // The booking the last lookup() made (work-aware PREFIX_MATCH or
  // AFFINITY_HINT with uncached tokens); none otherwise.
  BookingRef last_booking() const noexcept;
  // Applies what the gateway learned of a booked request (BookingFeedback);
  // a booking that ended already is left alone. Wall µs.
  void feedback(const BookingFeedback& feedback, std::int64_t now_wall_us);
  // Visits the replicas with a work record in scope (tenant, model,
  // hash_scheme) and the prefill work booked on each not done by
  // `now_wall_us` (µs, ≥ 0, at the replica's learned rate): the queued part
  // of the work-aware wait (docs/ranking.md "Cost"). Nothing for an unknown scope.
  void queued_work(
      std::string_view tenant_id, std::string_view model_id, std::string_view hash_scheme,
      std::int64_t now_wall_us,
      const std::function<void(std::string_view replica_id, std::int64_t queued_us)>& fn);

  // LookupPDRoute (docs/pd-routing.md): the prefill/decode pair of the
  // topology `topology_ref` names in the policy set in force, for the prompt
  // `query` describes (LookupRoute's steps 0–11 find what each replica holds).
  // Fills `out` completely. Never fails: an empty ref or the reserved tenant
  // is NO_HINT, an unknown ref UNKNOWN_TOPOLOGY. Side effects: the answer
  // books prefill work on the prefilling replica (as LookupRoute's work-aware
  // answer does) and one decode slot on the decode replica, held until an
  // event of that replica frees its KV or the topology's decodeHoldMs passes.
  void lookup_pd(const LookupQuery& query, std::string_view topology_ref, const LookupContext& ctx,
                 PdResult* out);

  // GetCacheState (docs/index.md): total_prefixes = distinct keys of
  // (tenant, model); replicas = its stats entries sorted by replica_id.
  // Fills `out` completely (clears it first).
  void get_cache_state(const CacheStateQuery& query, CacheState* out) const;

  // Visits the replicas GetCacheState lists for (tenant, model) — those with
  // stats — in the order they first reported, with their reported pressure,
  // until `fn` returns false or `max_visits` were visited: the endpoint
  // picker's per-pick work on this core stays bounded whatever reporters send
  // (gateway/picker.hh). No copy, no sort.
  using ReporterFn = std::function<bool(std::string_view replica, float pressure)>;
  void for_each_reporter(std::string_view tenant, std::string_view model, std::size_t max_visits,
                         const ReporterFn& fn) const;
  // The same over every model of `tenant`, in no order of models (a replica
  // once per model that reports it); each model visited costs a visit too.
  void for_each_reporter_any_model(std::string_view tenant, std::size_t max_visits,
                                   const ReporterFn& fn) const;

  // Entry slots one sweep slice examines when the server sweeps (and the
  // replay's in-process index, which must sweep as it does): bounded slices
  // keep a pass over a large index from blocking the reactor (docs/index.md
  // "Expiry (TTL)").
  static constexpr std::size_t kSweepSliceEntries = 4096;

  // TTL sweep slice: examines at most `budget` entry slots from the cursor,
  // removing (key, replica) entries with now − last_seen ≥ the tenant's TTL;
  // at the end of a pass also expires stats entries. Returns true when this
  // slice finished a full pass (the caller then waits for the next interval;
  // otherwise it schedules the next slice on a later loop turn).
  bool sweep_slice(std::int64_t now_wall_us, std::size_t budget);

  // --- export (state file, docs/persistence.md) ---

  // Visits the live entries among at most `budget` entry slots from `*cursor`
  // (start a pass at 0) and advances it. Returns true when the pass ended
  // (`*cursor` is then back at 0). Entries of one ingest are usually visited
  // consecutively (slab order), so callers can group them by timestamp.
  bool export_entries(std::uint32_t* cursor, std::size_t budget,
                      const std::function<void(const EntryView&)>& fn) const;
  // Visits every stats entry of this shard. O(tenants × models × replicas).
  void export_stats(const std::function<void(const StatsView&)>& fn) const;
  // Reports every applied change to `sink` (index/change.hh) from now on;
  // nullptr (the default) stops it. The sink outlives its installation.
  void set_change_sink(ChangeSink* sink) noexcept;
  // Global cap across shards (IndexGlobals): evicts this shard's oldest
  // entries while cap debt remains and they are the globally oldest within
  // the slack. Call on the shard's core after another shard's ingest named it
  // in cap_handoff.
  CapPayment pay_cap_debt();
  // This shard's slot in IndexGlobals::oldest (registration order); -1 when
  // over IndexGlobals::kMaxShards (such a shard evicts only its own).
  int cap_slot() const noexcept;

  // --- observability (read on the owner core; admin merges shards) ---

  // (key, replica) entries in this shard.
  std::int64_t entry_count() const noexcept;
  // Distinct prefix keys in this shard.
  std::int64_t key_count() const noexcept;
  // Cap/TTL evictions since start.
  const EvictionCounters& eviction_counters() const noexcept;
  // Stats entries held, and stats of a new (tenant, model, replica) refused
  // at IndexConfig's bounds since start.
  std::size_t stats_entry_count() const noexcept;
  std::uint64_t stats_refused() const noexcept;
  // Visits (tenant_id, keys evicted for reason over_entries) since start.
  void for_each_tenant_eviction(
      const std::function<void(std::string_view tenant, std::uint64_t count)>& fn) const;
  // Visits (model_id, distinct keys) for inferencecache_index_entries{model};
  // a model whose keys drained is visited with 0 until the next call, then
  // forgotten (sum the shards per model).
  void for_each_model_keys(
      const std::function<void(std::string_view model, std::int64_t keys)>& fn);
  // Visits the predicted-vs-delivered rows of this shard (ReplicaHitRow):
  // one per replica work record of a scope, one per held ReplicaStats.
  // O(scopes × their replicas + stats).
  void for_each_replica_hits(const std::function<void(const ReplicaHitRow&)>& fn) const;
  // /snapshot rows of this shard's tenants (docs/admin.md), unsorted.
  // O(tenants × replicas + stats), no scan of the entries.
  ShardSnapshot collect_snapshot() const;

  // Approximate heap bytes held by the index structures (slabs, tables, maps).
  std::size_t memory_bytes() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ic::index
