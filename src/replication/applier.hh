#pragma once
// Applies the replication stream, in stream order, to the owner cores
// (docs/replication.md "Applying the stream"). The replication thread calls
// apply() for each record; the change travels to its owner core through the
// runtime's cross-core path (post_to_core, the one place this module hands
// work to a core) and runs there like a local ingest, never on the NATS
// thread. Per-core FIFO keeps each tenant's records in stream order.
//
// Bounded: at most `max_in_flight` records are posted and not yet run; the
// replication thread waits (it is not a reactor) and the NATS library holds
// the rest, within its own pending limits.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "inferencecache/state/v1/state.pb.h"
#include "runtime/task.hh"
#include "service/sharded_index.hh"

namespace ic::replication {

namespace state_pb = ::inferencecache::state::v1;

// The cross-core hop of this module: queues `task` on `core` from the
// replication thread. False when it was not queued.
bool post_to_core(service::ShardedIndex& router, unsigned core, runtime::Task task);

class Applier {
 public:
  // `router` (its shards and clock) outlives the applier.
  explicit Applier(service::ShardedIndex& router, std::int64_t max_in_flight = 4096);
  ~Applier();  // drain()s
  Applier(const Applier&) = delete;
  Applier& operator=(const Applier&) = delete;

  // Records up to `sequence` are already in the index (the state file's
  // position): the stream is resumed after it. Before the first apply().
  void resume_after(std::uint64_t sequence);
  // The next stream sequence expected (resume point for a new subscription).
  std::uint64_t next_sequence() const { return dispatched_.load() + 1; }

  // Replication thread: posts record `sequence` (> every earlier one) to its
  // owner core, or to every core for a policy. Waits while max_in_flight
  // records are outstanding; false (nothing posted) once `stopping` is set.
  bool apply(std::uint64_t sequence, state_pb::ReplicationRecord&& record,
             const std::atomic<bool>& stopping);

  // Replication thread: record `sequence` is not applied (unknown format,
  // unparsable); the stream moves past it.
  void skip(std::uint64_t sequence) { dispatched_.store(sequence, std::memory_order_release); }

  // The stream sequence up to which every record has run on its core(s).
  // Any thread.
  std::uint64_t applied_through() const;
  // Waits until every posted record ran; false after `timeout`.
  bool drain(std::chrono::milliseconds timeout);

 private:
  bool post(unsigned core, std::uint64_t sequence, runtime::Task task,
            const std::atomic<bool>& stopping);
  void apply_policy(std::uint64_t sequence, const std::string& json,
                    const std::atomic<bool>& stopping);

  service::ShardedIndex& router_;
  const std::int64_t max_in_flight_;
  const unsigned cores_;
  std::atomic<std::uint64_t> dispatched_{0};              // highest sequence posted (or skipped)
  std::unique_ptr<std::atomic<std::uint64_t>[]> posted_;  // per core: last posted
  std::unique_ptr<std::atomic<std::uint64_t>[]> done_;    // per core: last run
  std::atomic<std::int64_t> in_flight_{0};
};

}  // namespace ic::replication
