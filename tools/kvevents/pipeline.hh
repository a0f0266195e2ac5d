// Per-replica state plus batching (docs/kvevents.md "What reaches the server"): applies decoded
// events to each replica's ReplicaState and turns the changes into server messages. Adds are
// batched per replica for `window` (or 4,096 entries) into one CacheStateUpdate; an eviction
// first flushes the replica's pending adds when one of them is the evicted prefix, then sends
// PREFIX_EVICTED; a clear drops pending adds and sends ALL_CLEARED. Single-threaded: the subscriber
// thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvevents/counters.hh"
#include "kvevents/event.hh"
#include "kvevents/outbox.hh"
#include "kvevents/replica_state.hh"

namespace ic::tools::kvevents {

// Stamped on every message (--tenant-id, --model-id, --hash-scheme).
struct Identity {
  std::string tenant_id;
  std::string model_id;
  std::string hash_scheme = "vllm";
};

// Adds per CacheStateUpdate before an early flush.
inline constexpr std::size_t kMaxBatchEntries = 4096;
// Blocks one refresh_due() call re-reports per replica (a pass is spread over event-loop turns).
inline constexpr std::size_t kRefreshSlice = 4096;

class Pipeline {
 public:
  using Clock = std::chrono::steady_clock;

  // `window_us`: how long adds wait for company before they are flushed (µs). `refresh_us`: how
  // often every tracked block is re-reported (µs; 0 = never), see refresh_due().
  Pipeline(Identity identity, StateOptions options, std::int64_t window_us, Counters& counters,
           Outbox& outbox, std::int64_t refresh_us = 0);
  ~Pipeline();

  // Applies one event attributed to `replica`.
  void apply(const std::string& replica, const Event& event, Clock::time_point now);
  // Drops the replica's state and pending adds and sends ALL_CLEARED; counts `reason`.
  void resync(const std::string& replica, Metric reason);
  // Sends the adds whose window has passed.
  void flush_due(Clock::time_point now);
  // Sends every pending add now (shutdown).
  void flush_all();
  // The server expires what nobody re-reported within its TTL (docs/index.md "Expiry (TTL)"),
  // and an engine announces a block once however long it stays resident: every `refresh_us`
  // each replica starts a pass that re-reports every tracked block at its tier, kRefreshSlice
  // blocks per call, through the usual batching. Blocks gone meanwhile are skipped.
  void refresh_due(Clock::time_point now);
  // After the server (re)connected: ALL_CLEARED then every tracked block, for each replica in
  // `replicas` and each replica seen so far, so the server's index converges to ours.
  void snapshot(const std::vector<std::string>& replicas);
  // Blocks tracked across replicas.
  std::size_t tracked_blocks() const;

 private:
  class Replica;
  Replica& replica(const std::string& name);
  void clear(Replica& r);

  Identity identity_;
  StateOptions options_;
  std::chrono::microseconds window_;
  std::chrono::microseconds refresh_;
  Counters& counters_;
  Outbox& outbox_;
  std::map<std::string, std::unique_ptr<Replica>> replicas_;
};

}  // namespace ic::tools::kvevents
