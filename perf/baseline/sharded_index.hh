#pragma once
// The baseline's index: the SAME ic::index::Shard as inferencecache-server,
// one shard per thread, tenants partitioned by the same owner_core() hash.
// grpc++ owns its threads and runs a call on whichever one polled it, so a
// shard cannot be confined to a core: each shard sits behind its own mutex
// (what a grpc++ user would write; contention only between calls of tenants
// hashed to the same shard).

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "index/clock.hh"
#include "index/partition.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::perf {

namespace pb = ::inferencecache::v1alpha1;

class ShardedIndex {
 public:
  // `shards` ≥ 1 index partitions with default IndexConfig and policies (the
  // server's defaults without --policy-file). `sweep_interval` is the TTL
  // sweep period (docs/index.md: every minute); zero disables the sweeper.
  explicit ShardedIndex(unsigned shards,
                        std::chrono::milliseconds sweep_interval = std::chrono::minutes(1));
  ~ShardedIndex();
  ShardedIndex(const ShardedIndex&) = delete;
  ShardedIndex& operator=(const ShardedIndex&) = delete;

  unsigned shards() const noexcept { return static_cast<unsigned>(slots_.size()); }
  // Shard owning `tenant_id`: index::owner_core(tenant_id, shards()).
  unsigned shard_of(std::string_view tenant_id) const noexcept;

  // LookupRoute under the tenant's shard lock. `deadline` is grpc++'s call
  // deadline (system clock; time_point::max() = none), converted to the
  // index's monotonic µs.
  void lookup(const pb::LookupRouteRequest& request, std::chrono::system_clock::time_point deadline,
              pb::LookupRouteResponse& out);

  // One ReportCacheState message under its tenant's shard lock.
  index::IngestResult ingest(const pb::CacheStateUpdate& update);

 private:
  // A shard and its lock, on their own cache lines.
  struct alignas(64) Slot {
    explicit Slot(index::IndexGlobals* globals) : shard(index::IndexConfig{}, globals) {}
    std::mutex mutex;
    index::Shard shard;
  };

  // Runs every shard's TTL sweep each interval in bounded slices, taking the
  // shard lock per slice only, so lookups wait at most one slice.
  void sweep_loop(std::chrono::milliseconds interval);

  index::IndexGlobals globals_;
  index::SystemClock clock_;  // stateless: safe to share between threads
  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread sweeper_;
};

// Converts grpc++'s system-clock deadline to an absolute CLOCK_MONOTONIC µs
// deadline, given both clocks read "now". time_point::max() → INT64_MAX.
std::int64_t deadline_to_monotonic_us(std::chrono::system_clock::time_point deadline,
                                      std::chrono::system_clock::time_point now_system,
                                      std::int64_t now_monotonic_us) noexcept;

}  // namespace ic::perf
