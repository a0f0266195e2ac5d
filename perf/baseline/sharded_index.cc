#include "sharded_index.hh"

#include "sharding/index_wire.hh"

#include <cstdint>
#include <limits>

namespace ic::perf {

namespace {
// TTL sweep slice size (entry slots per lock hold): bounds a lookup's wait.
constexpr std::size_t kSweepBudget = 4096;
}  // namespace

std::int64_t deadline_to_monotonic_us(std::chrono::system_clock::time_point deadline,
                                      std::chrono::system_clock::time_point now_system,
                                      std::int64_t now_monotonic_us) noexcept {
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return std::numeric_limits<std::int64_t>::max();
  }
  const auto remaining =
      std::chrono::duration_cast<std::chrono::microseconds>(deadline - now_system).count();
  return now_monotonic_us + remaining;
}

ShardedIndex::ShardedIndex(unsigned shards, std::chrono::milliseconds sweep_interval) {
  if (shards == 0) shards = 1;
  slots_.reserve(shards);
  for (unsigned i = 0; i < shards; ++i) slots_.push_back(std::make_unique<Slot>(&globals_));
  if (sweep_interval.count() > 0) {
    sweeper_ = std::thread([this, sweep_interval] { sweep_loop(sweep_interval); });
  }
}

ShardedIndex::~ShardedIndex() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

unsigned ShardedIndex::shard_of(std::string_view tenant_id) const noexcept {
  return index::owner_core(tenant_id, shards());
}

void ShardedIndex::lookup(const pb::LookupRouteRequest& request,
                          std::chrono::system_clock::time_point deadline,
                          pb::LookupRouteResponse& out) {
  index::LookupContext ctx;
  ctx.clock = &clock_;
  ctx.start_mono_us = clock_.monotonic_us();  // latency includes the lock wait
  ctx.deadline_mono_us =
      deadline_to_monotonic_us(deadline, std::chrono::system_clock::now(), ctx.start_mono_us);
  Slot& slot = *slots_[shard_of(request.tenant_id())];
  std::lock_guard<std::mutex> lock(slot.mutex);
  ic::sharding::wire::lookup_route(slot.shard, request, ctx, &out);
}

index::IngestResult ShardedIndex::ingest(const pb::CacheStateUpdate& update) {
  const std::int64_t now = clock_.wall_us();
  Slot& slot = *slots_[shard_of(update.tenant_id())];
  std::lock_guard<std::mutex> lock(slot.mutex);
  return ic::sharding::wire::ingest(slot.shard, update, now);
}

void ShardedIndex::sweep_loop(std::chrono::milliseconds interval) {
  std::unique_lock<std::mutex> stop_lock(stop_mutex_);
  while (!stop_cv_.wait_for(stop_lock, interval, [this] { return stopping_; })) {
    for (const std::unique_ptr<Slot>& slot : slots_) {
      bool pass_done = false;
      while (!pass_done && !stopping_) {
        std::lock_guard<std::mutex> lock(slot->mutex);
        pass_done = slot->shard.sweep_slice(clock_.wall_us(), kSweepBudget);
      }
    }
  }
}

}  // namespace ic::perf
