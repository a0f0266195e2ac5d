#pragma once
// Read copies of chosen tenants on several cores (docs/placement.md): the
// opt-in placement behind `--spread-tenants` / `--spread-cores`.
//
// A spread tenant keeps its tenant-hash owner core (index/partition.hh) as
// its single writer and sequencer. Every ingest and event of the tenant is
// applied on the owner first, then forwarded in the owner's order to a copy
// shard on each of the other K−1 cores, with the owner's wall clock stamped
// in; the owner's own removals (TTL sweep, global cap, tenant quota: the
// shard's ChangeSink kPrefixEvicted reports) follow as PREFIX_EVICTED events
// right after the input that caused them. Copies never decide an eviction:
// they run no sweep, their cap is unreachable and their policies carry no
// quotas. A LookupRoute of the tenant arriving on a copy core is answered by
// that core's copy, with no cross-core hop.
//
// Forwarding never blocks and never drops silently: the changes for one
// (tenant, copy core) wait in the owner's FIFO queue, leave it in one batch
// per loop turn through the (owner → copy core) mailbox, and a full mailbox
// keeps them queued and retries from a timer, in order. A queue past
// SpreadOptions::max_queued changes or max_queued_bytes is counted and
// replaced by a resync: the copy stops answering (its lookups go to the
// owner) until a full export of the tenant, taken on the owner, has been
// loaded into a fresh copy shard.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy.hh"
#include "index/shard.hh"
#include "runtime/cores.hh"
#include "sharding/placement.hh"

namespace ic::placement {

namespace pb = ::inferencecache::v1alpha1;

struct SpreadOptions {
  // The spread tenants (duplicates and the reserved tenant are ignored).
  std::vector<std::string> tenants;
  // Cores holding each tenant, its owner included: the owner and the next
  // K−1 cores in index order (wrapping). 0 or more than the cores = all.
  unsigned cores_per_tenant = 0;
  // Changes, and their bytes (protobuf size), queued for one (tenant, copy
  // core) beyond its mailbox before the copy is resynchronized instead.
  std::size_t max_queued = 65536;
  std::size_t max_queued_bytes = std::size_t{64} << 20;
  // Delay before retrying a full mailbox, µs.
  std::int64_t retry_us = 100;
};

// Counters of one SpreadPlacement (relaxed atomics; any thread may read).
struct SpreadCounters {
  std::atomic<std::uint64_t> forwarded{0};     // changes handed to a copy core
  std::atomic<std::uint64_t> mailbox_full{0};  // batches refused by a full mailbox (retried)
  std::atomic<std::uint64_t> resyncs{0};       // copies rebuilt after a queue overflow
};

class SpreadPlacement final : public sharding::Placement {
 public:
  // `owners[c]` is core c's shard (the tenant-hash owners). Copies are built
  // with `config` (their cap made unreachable), register in `globals` (their
  // entries count against the global cap: K copies cost K× the tenant's
  // entries) and start with `policies` minus the quotas. All references
  // outlive this object.
  SpreadPlacement(runtime::Cores& cores, std::vector<index::Shard*> owners,
                  index::IndexConfig config, index::IndexGlobals* globals,
                  std::shared_ptr<const config::PolicySet> policies, SpreadOptions options);
  ~SpreadPlacement() override;

  // Before the reactors start (after a state file or snapshot load): loads
  // every copy from its owner's current state.
  void seed_copies();

  // The cores holding `tenant` (owner first); empty when it is not spread.
  std::vector<unsigned> cores_of(std::string_view tenant) const;
  // Core `core`'s copy of `tenant` (call on that core, or with the runtime
  // stopped), nullptr when it has none.
  const index::Shard* copy(unsigned core, std::string_view tenant) const;
  const SpreadCounters& counters() const { return counters_; }

  // sharding::Placement
  index::Shard* copy_for(unsigned core, std::string_view tenant) override;
  void before_apply(unsigned core, std::string_view tenant) override;
  void applied(unsigned core, const pb::CacheStateUpdate& update,
               std::int64_t now_wall_us) override;
  void applied(unsigned core, const pb::CacheEvent& event, std::int64_t now_wall_us) override;
  void policies_changed(unsigned core,
                        const std::shared_ptr<const config::PolicySet>& set) override;
  void set_change_sink(unsigned core, index::ChangeSink* sink) override;

 private:
  struct Tenant;
  struct Change;
  struct Batch;
  class OwnerSink;

  Tenant* find(std::string_view tenant) const;
  Tenant* owned_here(unsigned core, std::string_view tenant) const;
  void forward_input(Tenant& t, unsigned owner, Change input);
  void enqueue(Tenant& t, Change change);
  void schedule_flush(unsigned owner);
  void flush(unsigned owner);
  bool flush_link(Tenant& t, unsigned copy_core);
  void resync(Tenant& t, unsigned copy_core);
  void apply_batch(Tenant& t, unsigned copy_core, Batch& batch);
  void on_owner_change(unsigned owner, const index::Change& change);
  std::unique_ptr<index::Shard> new_copy(unsigned core) const;

  runtime::Cores& cores_;
  std::vector<index::Shard*> owners_;
  index::IndexConfig copy_config_;
  index::IndexGlobals* globals_;
  SpreadOptions options_;
  std::vector<std::unique_ptr<Tenant>> tenants_;
  // Per core, touched on that core only.
  struct CoreState;
  std::vector<std::unique_ptr<CoreState>> per_core_;
  SpreadCounters counters_;
};

// `set` without its quotas: a copy must not decide quota evictions (the
// owner's arrive as removals); every policy stays, lookups read them.
std::shared_ptr<const config::PolicySet> without_quotas(const config::PolicySet& set);

}  // namespace ic::placement
