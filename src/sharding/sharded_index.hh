#pragma once
// The index as one object over every core's shard (docs/index.md
// "Partitioning"; docs/architecture.md rule 8 and "Across cores"):
//   owner = index::owner_core(tenant_id, cores)  (seeded XXH3, stable)
// Each call runs the shard's work on the tenant's owner core through the
// runtime's one cross-core verb (runtime/submit.hh): inline when the owner is
// the calling core, else a Task there and the answer back here.
// Shedding (rule 5) is the caller's answer to a refused call: ingest,
// apply_event and get_cache_state hand the request back when the owner's
// mailbox is full; answers travelling back are never dropped.
// LookupRoute, the hot path, calls the verb itself on shard(owner)
// (service/index_methods.cc): translating and looking up is all it runs on
// the owner, and it already decides locality (deadline guard, fail-open
// answer), so a facade call would only forward (docs/architecture.md
// "LookupRoute path").
// An opt-in Placement (sharding/placement.hh, docs/placement.md) adds read
// copies of chosen tenants on other cores: the owner stays the one writer,
// applies every change first (apply_ingest / apply_event_now) and the
// placement forwards it; LookupRoute asks placement()->copy_for first.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "index/clock.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "runtime/cores.hh"
#include "runtime/submit.hh"
#include "sharding/change_observer.hh"
#include "sharding/index_wire.hh"
#include "sharding/placement.hh"

namespace ic::sharding {

namespace pb = ::inferencecache::v1alpha1;

class ShardedIndex {
 public:
  // `shards[c]` is core c's index shard, touched only on core c
  // (shards.size() == cores.cores(), none null: checked, aborts otherwise).
  // `clock`: monotonic µs for latency and deadlines (same clock as the
  // reactor's now_us, i.e. CLOCK_MONOTONIC) and wall µs for ingest; safe to
  // read from every core (index::SystemClock is). All three outlive this object.
  ShardedIndex(runtime::Cores& cores, std::vector<index::Shard*> shards, index::Clock& clock);

  runtime::Cores& cores() const { return cores_; }
  index::Clock& clock() const { return clock_; }
  // The owner core of `tenant_id`.
  unsigned owner(std::string_view tenant_id) const;
  // Core `core`'s shard (call only on that core).
  index::Shard& shard(unsigned core) const { return *shards_[core]; }

  // Replication (docs/replication.md): `observer` sees every accepted ingest
  // and event; nullptr = none. Set before the reactors start.
  void set_observer(ChangeObserver* observer) { observer_ = observer; }
  // Hands an accepted change to the observer, if any (may stamp it).
  // Returns its replication sequence for ingest()/apply_event(); 0 = none.
  template <typename Change>
  std::uint64_t observe(Change& change) const {
    return observer_ != nullptr ? observer_->accepted(change) : 0;
  }
  // On `core`: whether the change `sequence` (observe()'s) of `tenant_id`
  // is applied now (ChangeObserver::early_apply; always for 0).
  bool early_apply(unsigned core, std::string_view tenant_id, std::uint64_t sequence) const {
    return sequence == 0 || observer_ == nullptr ||
           observer_->early_apply(core, tenant_id, sequence);
  }

  // The placement beyond the tenant-hash owner; nullptr (the default) =
  // none. Set before the reactors start; it outlives this object's use.
  void set_placement(Placement* placement) { placement_ = placement; }
  Placement* placement() const { return placement_; }

  // On owner core `core`: applies one ingest (resp. event) to its shard with
  // wall clock `now_wall_us` and hands it to the placement, if any. Every
  // path that changes an owner's index (RPCs, replication) goes through these.
  index::IngestResult apply_ingest(unsigned core, const pb::CacheStateUpdate& update,
                                   std::int64_t now_wall_us);
  std::size_t apply_event_now(unsigned core, const pb::CacheEvent& event, std::int64_t now_wall_us);
  // On core `core` (or before the reactors start): installs `set` in its
  // shard and its placement copies.
  void set_policies(unsigned core, const std::shared_ptr<const config::PolicySet>& set);
  // On core `core`: the StreamCacheEvents sink of its shard (nullptr: none).
  void set_change_sink(unsigned core, index::ChangeSink* sink);

  // Every call below takes `core` = owner(tenant_id of its request), which
  // the caller computes once (it also decides the caller's shed answer).

  // Ingests one ReportCacheState message on the owner and pays the global
  // cap's debt it left (hand_off_cap). `sequence`: observe()'s answer
  // (early_apply). Returns the update back when the owner's mailbox is full.
  std::optional<pb::CacheStateUpdate> ingest(unsigned core, pb::CacheStateUpdate&& update,
                                             std::uint64_t sequence = 0);

  // Runs `reply()` here once every call this core made to `core` before it
  // ran there (mailboxes are FIFO per core pair); never shed.
  template <typename Reply>
  void barrier(unsigned core, Reply reply);

  // PublishEvent on the owner; `reply()` here once applied. `sequence`:
  // observe()'s answer (early_apply). Returns the event back when the
  // owner's mailbox is full.
  template <typename Reply>
  std::optional<pb::CacheEvent> apply_event(unsigned core, pb::CacheEvent&& event, Reply reply,
                                            std::uint64_t sequence = 0);

  // GetCacheState on the owner; `reply(GetCacheStateResponse&&)` here.
  // Returns the request back when the owner's mailbox is full.
  template <typename Reply>
  std::optional<pb::GetCacheStateRequest> get_cache_state(unsigned core,
                                                          pb::GetCacheStateRequest&& request,
                                                          Reply reply);

  // The global cap left entries for an older shard (IngestResult::
  // cap_handoff = its slot): runs Shard::pay_cap_debt on that shard's core,
  // following its own hand-off, at most cores() hops. A full mailbox drops
  // the request: the debt stays bounded by the cap slack (docs/hostile-peers.md).
  void hand_off_cap(int slot, unsigned hops = 0);

 private:
  // apply_ingest / apply_event_now: `apply(shard, change, now_wall_us)` on
  // the owner's shard, between the placement's before_apply and applied.
  template <typename Change, typename Apply>
  auto apply_on_owner(unsigned core, const Change& change, std::int64_t now_wall_us, Apply apply);

  runtime::Cores& cores_;
  std::vector<index::Shard*> shards_;
  index::Clock& clock_;
  std::vector<int> slot_core_;  // IndexGlobals slot → core, -1 when not ours
  ChangeObserver* observer_ = nullptr;
  Placement* placement_ = nullptr;
};

// ---- implementation ----

template <typename Reply>
void ShardedIndex::barrier(unsigned core, Reply reply) {
  runtime::submit_to(
      cores_, core, 0, [](int&) {}, std::move(reply));
}

template <typename Reply>
std::optional<pb::CacheEvent> ShardedIndex::apply_event(unsigned core, pb::CacheEvent&& event,
                                                        Reply reply, std::uint64_t sequence) {
  return runtime::try_submit_to(
      cores_, core, std::move(event),
      [this, core, sequence](pb::CacheEvent& e) {
        if (early_apply(core, e.tenant_id(), sequence)) {
          apply_event_now(core, e, clock_.wall_us());
        }
      },
      std::move(reply));
}

template <typename Reply>
std::optional<pb::GetCacheStateRequest> ShardedIndex::get_cache_state(
    unsigned core, pb::GetCacheStateRequest&& request, Reply reply) {
  return runtime::try_submit_to(
      cores_, core, std::move(request),
      [shard = shards_[core]](pb::GetCacheStateRequest& r) {
        pb::GetCacheStateResponse response;
        wire::get_cache_state(*shard, r, &response);
        return response;
      },
      std::move(reply));
}

}  // namespace ic::sharding
