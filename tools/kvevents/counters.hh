// The adapter's own metrics (docs/kvevents.md "Its own endpoints"): relaxed atomic counters and
// gauges written by the subscriber, sender and scraper threads and rendered as Prometheus text.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ic::tools::kvevents {

// One value per metric series; the table in counters.cc gives each its name, labels and help.
enum class Metric : std::size_t {
  batches_received,
  batches_malformed,
  events_stored,
  events_removed,
  events_cleared,
  events_unknown,
  events_malformed,
  blocks_stored,
  blocks_removed,
  dropped_block_count_mismatch,
  dropped_unknown_parent,
  dropped_lora_unmapped,
  dropped_bad_block_size,
  group_skipped,
  block_size_mismatch,
  duplicate_blocks,
  unknown_removals,
  seq_gaps,
  duplicate_batches,
  replays_requested,
  replayed_batches,
  resync_restart,
  resync_replay_overrun,
  resync_no_replay,
  resync_replay_timeout,
  resync_replay_buffer_full,
  resync_capacity,
  updates_sent,
  prefix_entries_sent,
  evictions_sent,
  all_cleared_sent,
  stats_sent,
  send_errors,
  reconnects,
  snapshots_sent,
  refreshed_blocks,
  superseded_entries,
  scrapes,
  scrape_errors,
  queue_depth,       // gauge: entries waiting for the server
  stream_connected,  // gauge: 1 while the ReportCacheState stream is open
  tracked_blocks,    // gauge: blocks held across all replicas
  count_
};

class Counters {
 public:
  void add(Metric m, std::uint64_t n = 1) {
    values_[static_cast<std::size_t>(m)].fetch_add(n, std::memory_order_relaxed);
  }
  void set(Metric m, std::uint64_t v) {
    values_[static_cast<std::size_t>(m)].store(v, std::memory_order_relaxed);
  }
  std::uint64_t get(Metric m) const {
    return values_[static_cast<std::size_t>(m)].load(std::memory_order_relaxed);
  }
  // Prometheus text exposition (version 0.0.4) of every series, names prefixed
  // `inferencecache_kvevents_`.
  std::string render() const;

 private:
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Metric::count_)> values_{};
};

}  // namespace ic::tools::kvevents
