#pragma once
// Applies the replication stream, in stream order, to the owner cores
// (docs/replication.md "Applying the stream"). The replication thread add()s
// the records of one receive round and flush()es them: each core gets ONE
// task holding its records in stream order (a policy goes into every core's),
// through the runtime's cross-core path (post_to_core, the one place this
// module hands work to a core), where they run like local ingests, never on
// the NATS thread. One post per core per round rather than per record: a post
// from a non-reactor thread costs a lock and an eventfd write, and wakes the
// core. Per-core FIFO keeps each tenant's records in stream order.
//
// This server's own records pass the core's EchoFilter: an echo whose early
// apply already stands in stream order is skipped (docs/replication.md
// "Applying the stream", the echo rule).
//
// Bounded: at most `max_in_flight` records are posted and not yet run (plus
// one message's); the replication thread waits (it is not a reactor) and the
// rest waits in the stream (a pull consumer fetches no more). On the core, the
// posted batches join that core's FIFO, which runs for at most kApplySliceUs
// per reactor turn (deferring the rest to the next turn), so a burst delays
// the core's other calls by about one slice, not by a whole batch. A batch
// posted while an earlier one is still being sliced waits behind it: stream
// order holds across turns.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/policy.hh"
#include "inferencecache/state/v1/state.pb.h"
#include "replication/echo_filter.hh"
#include "replication/record.hh"
#include "runtime/task.hh"
#include "sharding/sharded_index.hh"

namespace ic::replication {

namespace state_pb = ::inferencecache::state::v1;
namespace pb = ::inferencecache::v1alpha1;

// The cross-core hop of this module: queues `task` on `core` from the
// replication thread. False when it was not queued.
bool post_to_core(sharding::ShardedIndex& router, unsigned core, runtime::Task task);

// Longest run of stream records on one core in one reactor turn (µs; checked
// after each record, so a turn may overshoot by one record).
inline constexpr std::int64_t kApplySliceUs = 500;

class Applier {
 public:
  // `router` (its shards and clock) outlives the applier. `origin`: this
  // server's (RecordEncoder::origin), whose records are its echoes.
  // `slice_us`: the longest run of records per core per reactor turn (µs).
  Applier(sharding::ShardedIndex& router, std::string origin, std::int64_t max_in_flight = 4096,
          std::int64_t slice_us = kApplySliceUs);
  ~Applier();  // drain()s
  Applier(const Applier&) = delete;
  Applier& operator=(const Applier&) = delete;

  // Records up to `sequence` are already in the index (the state file's
  // position): the stream is resumed after it. Before the first apply().
  void resume_after(std::uint64_t sequence);
  // The next stream sequence expected (resume point for a new subscription).
  std::uint64_t next_sequence() const { return added_.load() + 1; }

  // Replication thread: queues record `sequence` (> every earlier one) for
  // its owner core, or every core for a policy; it runs after flush().
  void add(std::uint64_t sequence, state_pb::ReplicationRecord&& record);
  // The same for this server's own update or event, parsed on its core only
  // when the core's echo filter applies it again.
  void add(std::uint64_t sequence, OwnChange&& change);
  // Replication thread: record `sequence` is not applied (unknown format,
  // unparsable); the stream moves past it.
  void skip(std::uint64_t sequence);
  // Replication thread: posts what add() queued, one task per core. Waits
  // while max_in_flight records are outstanding; false (the queued records
  // dropped) once `stopping` is set.
  bool flush(const std::atomic<bool>& stopping);
  // Records queued by add() and not yet flushed.
  std::size_t queued() const { return queued_; }
  // Nothing queued, nothing posted and not yet run (replication thread).
  bool idle() const { return queued_ == 0 && in_flight_.load(std::memory_order_acquire) == 0; }
  // Replication thread: each core hands the free pages its heap keeps back to
  // the system (mi_collect), once a burst is applied.
  void collect_on_cores();

  // The stream sequence up to which every record has run on its core(s).
  // Any thread.
  std::uint64_t applied_through() const;
  // Waits until every posted record ran; false after `timeout`.
  bool drain(std::chrono::milliseconds timeout);

  // On `core`: this server's change `sequence` of `tenant_id` is about to be
  // applied early; false = don't (EchoFilter::early_apply).
  bool early_apply(unsigned core, std::string_view tenant_id, std::uint64_t sequence) {
    return core_state_[core].filter.early_apply(tenant_id, sequence);
  }
  // Echoes skipped so far (any thread).
  std::uint64_t echoes_skipped() const { return echoes_skipped_.load(std::memory_order_relaxed); }

 private:
  // One record for one core.
  using Op = std::variant<pb::CacheStateUpdate, pb::CacheEvent,
                          std::shared_ptr<const config::PolicySet>, OwnChange>;
  struct Item {
    Op op;
    std::uint64_t own_sequence = 0;  // origin_sequence when this server is the origin
  };
  struct Batch {
    std::vector<Item> ops;
    std::uint64_t last = 0;  // stream sequence of the last op
    std::size_t next = 0;    // on the core: the first op not run yet
  };
  // One core's state, on a cache line of its own (used on that core only):
  // its echo filter, and the batches posted to it and not yet run, in stream
  // order (the front one possibly part-run).
  struct alignas(64) CoreState {
    EchoFilter filter;
    std::deque<Batch> batches;
    bool drain_scheduled = false;  // a drain() is deferred on the core
  };
  void add_policy(std::uint64_t sequence, const std::string& json);
  // On `core`: `batch` joins the core's FIFO; a drain runs at the end of the turn.
  void enqueue(unsigned core, Batch&& batch);
  // On `core`: runs the FIFO's records for up to slice_, marking each
  // finished batch done; defers itself to the next turn while any are left.
  void drain(unsigned core);
  // Runs `batch`'s records from batch.next until `until` (at least one);
  // true when all ran.
  bool run(unsigned core, Batch& batch, std::chrono::steady_clock::time_point until);
  bool passes(unsigned core, const Item& item);
  void apply(unsigned core, Item& item);
  void queue(unsigned core, std::uint64_t sequence, Item&& item);

  sharding::ShardedIndex& router_;
  const std::string origin_;
  const std::int64_t max_in_flight_;
  const std::chrono::microseconds slice_;
  const unsigned cores_;
  std::vector<Batch> pending_;  // per core, replication thread only
  std::size_t queued_ = 0;
  std::atomic<std::uint64_t> added_{0};                   // highest sequence queued (or skipped)
  std::atomic<std::uint64_t> dispatched_{0};              // highest sequence posted (or skipped)
  std::unique_ptr<std::atomic<std::uint64_t>[]> posted_;  // per core: last posted
  std::unique_ptr<std::atomic<std::uint64_t>[]> done_;    // per core: last run
  std::atomic<std::int64_t> in_flight_{0};
  std::vector<CoreState> core_state_;  // per core, used on that core only
  std::atomic<std::uint64_t> echoes_skipped_{0};
};

}  // namespace ic::replication
