#include "kvevents/counters.hh"

#include <string_view>

#include "metrics/exposition.hh"

namespace ic::tools::kvevents {
namespace {

struct Series {
  Metric metric;
  std::string_view family;     // without the inferencecache_kvevents_ prefix
  std::string_view label_key;  // "": the family's only series, unlabelled
  std::string_view label_value;
  std::string_view type;
  std::string_view help;  // of the family: its first series only
};

// One family per run of rows: HELP/TYPE come from its first row.
// One series per line, however long its help.
// clang-format off
constexpr Series kSeries[] = {
    {Metric::batches_received, "batches_total", "", "", "counter", "Event batches received (live and replayed)."},
    {Metric::batches_malformed, "malformed_batches_total", "", "", "counter", "Payloads that were not an event batch, skipped."},
    {Metric::events_stored, "events_total", "type", "BlockStored", "counter", "Decoded events by type."},
    {Metric::events_removed, "events_total", "type", "BlockRemoved", "counter", ""},
    {Metric::events_cleared, "events_total", "type", "AllBlocksCleared", "counter", ""},
    {Metric::events_unknown, "events_total", "type", "unknown", "counter", ""},
    {Metric::events_malformed, "malformed_events_total", "", "", "counter", "Events with a wrong shape or types, skipped."},
    {Metric::blocks_stored, "blocks_total", "op", "stored", "counter", "Blocks named by applied events."},
    {Metric::blocks_removed, "blocks_total", "op", "removed", "counter", ""},
    {Metric::dropped_block_count_mismatch, "dropped_events_total", "reason", "block_count_mismatch", "counter", "BlockStored events not indexed."},
    {Metric::dropped_unknown_parent, "dropped_events_total", "reason", "unknown_parent", "counter", ""},
    {Metric::dropped_lora_unmapped, "dropped_events_total", "reason", "lora_unmapped", "counter", ""},
    {Metric::dropped_bad_block_size, "dropped_events_total", "reason", "bad_block_size", "counter", ""},
    {Metric::group_skipped, "skipped_group_events_total", "", "", "counter", "Events of KV groups other than 0 (not indexed)."},
    {Metric::block_size_mismatch, "block_size_mismatch_total", "", "", "counter", "BlockStored events whose block size differs from --engine-block-size."},
    {Metric::duplicate_blocks, "duplicate_blocks_total", "", "", "counter", "Extra physical copies of a block hash already held."},
    {Metric::unknown_removals, "unknown_removals_total", "", "", "counter", "Removals of blocks (or tiers) not held."},
    {Metric::seq_gaps, "seq_gaps_total", "", "", "counter", "Sequence gaps detected on a live stream."},
    {Metric::duplicate_batches, "duplicate_batches_total", "", "", "counter", "Batches already applied (seen live and replayed), skipped."},
    {Metric::replays_requested, "replays_total", "", "", "counter", "Replay requests sent to an engine's replay socket."},
    {Metric::replayed_batches, "replayed_batches_total", "", "", "counter", "Batches received from replay."},
    {Metric::resync_restart, "resyncs_total", "reason", "publisher_restart", "counter", "Replica state dropped (ALL_CLEARED) and rebuilt."},
    {Metric::resync_replay_overrun, "resyncs_total", "reason", "replay_overrun", "counter", ""},
    {Metric::resync_no_replay, "resyncs_total", "reason", "no_replay_endpoint", "counter", ""},
    {Metric::resync_replay_timeout, "resyncs_total", "reason", "replay_timeout", "counter", ""},
    {Metric::resync_replay_buffer_full, "resyncs_total", "reason", "replay_buffer_full", "counter", ""},
    {Metric::resync_capacity, "resyncs_total", "reason", "capacity", "counter", ""},
    {Metric::updates_sent, "updates_sent_total", "", "", "counter", "CacheStateUpdate messages written to ReportCacheState."},
    {Metric::prefix_entries_sent, "prefix_entries_sent_total", "", "", "counter", "PrefixEntry messages written."},
    {Metric::evictions_sent, "server_events_total", "type", "PREFIX_EVICTED", "counter", "PublishEvent calls answered."},
    {Metric::all_cleared_sent, "server_events_total", "type", "ALL_CLEARED", "counter", ""},
    {Metric::stats_sent, "stats_sent_total", "", "", "counter", "Stats-only updates written."},
    {Metric::send_errors, "send_errors_total", "", "", "counter", "Failed writes or calls to the server."},
    {Metric::reconnects, "reconnects_total", "", "", "counter", "Connections (re)established to the server."},
    {Metric::snapshots_sent, "snapshots_total", "", "", "counter", "Full-state re-reports after (re)connecting."},
    {Metric::refreshed_blocks, "refreshed_blocks_total", "", "", "counter", "Tracked blocks re-reported so the server's TTL does not expire them (--refresh-interval)."},
    {Metric::superseded_entries, "superseded_entries_total", "", "", "counter", "Queued entries discarded while disconnected; the next snapshot re-sends the state."},
    {Metric::scrapes, "engine_scrapes_total", "", "", "counter", "Engine /metrics scrapes."},
    {Metric::scrape_errors, "engine_scrape_errors_total", "", "", "counter", "Scrapes that failed or had no usable family."},
    {Metric::queue_depth, "queue_depth", "", "", "gauge", "Entries queued for the server."},
    {Metric::stream_connected, "server_connected", "", "", "gauge", "1 while connected to the server."},
    {Metric::tracked_blocks, "tracked_blocks", "", "", "gauge", "Engine blocks tracked across replicas."},
};
// clang-format on

}  // namespace

std::string Counters::render() const {
  std::string out;
  metrics::Writer w(out, "inferencecache_kvevents_");
  std::string_view last_family;
  for (const Series& s : kSeries) {
    if (s.family != last_family) {
      w.family(s.family, s.type, s.help);
      last_family = s.family;
    }
    if (s.label_key.empty()) {
      w.sample(s.family, {}, get(s.metric));
    } else {
      w.sample(s.family, {{s.label_key, s.label_value}}, get(s.metric));
    }
  }
  return out;
}

}  // namespace ic::tools::kvevents
