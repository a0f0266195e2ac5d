#pragma once
// Routes the index-backed InferenceCache calls to the tenant's owner core
// (docs/index.md "Partitioning"; docs/architecture.md rule 8):
//   owner = index::owner_core(tenant_id, cores)  (seeded XXH3, stable)
//   owner == this core → the shard is called inline (no hop);
//   otherwise a move-only Task carries the request to the owner and another
//   carries the answer back to the connection's core, where the weak
//   CallHandle makes a late answer (stream reset meanwhile) a no-op.
// Shedding (rule 5): a full mailbox towards the owner is RESOURCE_EXHAUSTED
// for ReportCacheState / PublishEvent / GetCacheState; LookupRoute fails open
// with NO_HINT. Answers travelling back are never dropped: a full mailbox is
// retried from a timer (kReplyRetryUs).

#include <cstdint>
#include <memory>
#include <vector>

#include "index/clock.hh"
#include "index/shard.hh"
#include "service/change_observer.hh"
#include "service/core_link.hh"

namespace ic::service {

// Delay between attempts to post an answer back through a full mailbox (µs).
inline constexpr std::int64_t kReplyRetryUs = 100;

class IndexRouter {
 public:
  // `shards[c]` is core c's index shard, touched only on core c
  // (shards.size() == link.cores()). `clock`: monotonic µs for latency and
  // deadlines (same clock as the reactor's now_us, i.e. CLOCK_MONOTONIC) and
  // wall µs for ingest; it must be safe to read from every core
  // (index::SystemClock is). All three outlive the router.
  IndexRouter(CoreLink& link, std::vector<index::Shard*> shards, index::Clock& clock);

  CoreLink& link() const { return link_; }
  index::Clock& clock() const { return clock_; }
  // The owner core of `tenant_id`.
  unsigned owner(std::string_view tenant_id) const;
  // Core `core`'s shard (call only on that core).
  index::Shard& shard(unsigned core) const { return *shards_[core]; }

  // The global cap left entries for an older shard (IngestResult::
  // cap_handoff = its slot): runs Shard::pay_cap_debt on that shard's core,
  // following its own hand-off, at most cores() hops. A full mailbox drops
  // the request: the debt stays bounded by the cap slack (docs/hostile-peers.md).
  void hand_off_cap(int slot, unsigned hops = 0);

  // Posts `fn` (a move-only callable, heap-held) to `core`. On a full mailbox
  // returns false and leaves `fn` with the caller (to shed or retry).
  template <typename Fn>
  bool try_post(unsigned core, std::unique_ptr<Fn>& fn);

  // Posts `fn` to `core`, retrying every kReplyRetryUs from the calling core
  // while the mailbox is full: for answers and barriers that must not be lost.
  template <typename Fn>
  void post_reliably(unsigned core, std::unique_ptr<Fn> fn);

  // Replication (docs/replication.md): `observer` sees every accepted ingest
  // and event; nullptr = none. Set before the reactors start.
  void set_observer(ChangeObserver* observer) { observer_ = observer; }
  // Hands an accepted change to the observer, if any (may stamp it).
  template <typename Change>
  void observe(Change& change) const {
    if (observer_ != nullptr) observer_->accepted(change);
  }

 private:
  CoreLink& link_;
  std::vector<index::Shard*> shards_;
  index::Clock& clock_;
  std::vector<int> slot_core_;  // IndexGlobals slot → core, -1 when not ours
  ChangeObserver* observer_ = nullptr;
};

// ---- implementation ----

template <typename Fn>
bool IndexRouter::try_post(unsigned core, std::unique_ptr<Fn>& fn) {
  // The task frees `fn` after running it. A failed post destroys the task
  // without freeing (the caller still owns `fn`); a task accepted but never
  // run — only when the runtime is torn down — leaks it.
  Fn* raw = fn.get();
  const bool ok = link_.post(core, [raw] {
    std::unique_ptr<Fn> own(raw);
    (*own)();
  });
  if (ok) static_cast<void>(fn.release());
  return ok;
}

template <typename Fn>
void IndexRouter::post_reliably(unsigned core, std::unique_ptr<Fn> fn) {
  if (try_post(core, fn)) return;
  link_.add_timer(kReplyRetryUs,
                  [this, core, f = std::move(fn)]() mutable { post_reliably(core, std::move(f)); });
}

}  // namespace ic::service
