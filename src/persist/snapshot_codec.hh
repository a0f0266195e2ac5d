#pragma once
// Shard export ⇄ StateChunk (docs/persistence.md "What is saved"). Saving
// groups a shard's entries into legacy-form CacheStateUpdates; restoring
// feeds them back through Shard::ingest / apply_event, so a restored index
// obeys every ingest rule (quotas, the global cap, interning) by construction.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "index/shard.hh"
#include "persist/state_file.hh"

namespace ic::persist {

// Accumulates one StateChunk from EntryView / StatsView visits. Consecutive
// entries of the same (tenant, model, scheme, replica, last_seen) share one
// CacheStateUpdate (export order is slab order, so a chain ingested together
// stays together).
class ChunkBuilder {
 public:
  // A chunk is full() once it holds this many entries (bounds one record).
  explicit ChunkBuilder(std::size_t max_entries = 16384) : max_entries_(max_entries) {}

  void add_entry(const index::EntryView& v);
  // One stats-only update (timestamp = stats_reported_us) and, when liveness
  // is newer, one REPLICA_UPDATED event (timestamp = last_seen_us).
  void add_stats(const index::StatsView& v);
  bool full() const { return entries_ >= max_entries_; }
  bool empty() const { return chunk_.updates_size() == 0 && chunk_.liveness_size() == 0; }
  // Entries added since the last take().
  std::size_t entries() const { return entries_; }
  // The serialized chunk; the builder starts a new one.
  std::string take();

 private:
  std::size_t max_entries_;
  std::size_t entries_ = 0;
  state_pb::StateChunk chunk_;
  ::inferencecache::v1alpha1::CacheStateUpdate* current_ = nullptr;
};

// What restoring chunks applied.
struct RestoreCounts {
  std::int64_t entries = 0;  // (key, replica) entries ingested
  std::int64_t stats = 0;    // stats entries ingested
  std::int64_t chunks = 0;
};

// Parses one serialized chunk and ingests it into the owner shard of each
// tenant (index::owner_core over shards.size()). `now_wall_us` only matters
// for a zero timestamp (never written). Call before the reactors start, or on
// a thread that owns every shard. False (nothing applied) if unparsable.
bool restore_chunk(std::string_view serialized, std::span<index::Shard* const> shards,
                   std::int64_t now_wall_us, RestoreCounts* counts);
// The same for a chunk already parsed.
void restore_chunk(const state_pb::StateChunk& chunk, std::span<index::Shard* const> shards,
                   std::int64_t now_wall_us, RestoreCounts* counts);
// Only the part of `chunk` whose tenants core `core` of `cores` owns, into
// that core's `shard`: one thread per shard can restore in parallel.
void restore_owned(const state_pb::StateChunk& chunk, index::Shard& shard, unsigned core,
                   unsigned cores, std::int64_t now_wall_us, RestoreCounts* counts);

}  // namespace ic::persist
