#pragma once
// Figures of the NATS JetStream replication (docs/replication.md "Metrics"):
// written by the replication thread, the NATS library's callbacks and the
// reactors offering changes; read by scrapes and /readyz on any core.
// Relaxed atomics: each figure stands alone.

#include <cstdint>

#include "metrics/group.hh"
#include "metrics/relaxed.hh"

namespace ic::replication {

using metrics::Relaxed;

// The figures; ReplicationStats::figures() copies them for one scrape.
struct ReplicationFigures {
  Relaxed<bool> enabled = false;    // --nats-url given
  Relaxed<bool> connected = false;  // the NATS connection is up and the stream subscribed
  Relaxed<std::uint64_t> last_applied_sequence = 0;  // stream sequence applied on every core
  Relaxed<std::uint64_t> lag_records = 0;   // stream records not yet applied here (last known)
  Relaxed<std::int64_t> pending_bytes = 0;  // changes buffered for publishing (queued + unacked)
  Relaxed<std::int64_t> pending_records = 0;
  Relaxed<std::uint64_t> published = 0;         // records the stream acknowledged
  Relaxed<std::uint64_t> publish_failures = 0;  // publish attempts that failed (retried)
  Relaxed<std::uint64_t> dropped = 0;  // changes not buffered (buffer full): applied locally only
  Relaxed<std::uint64_t> applied = 0;  // stream records applied
  Relaxed<std::uint64_t> skipped = 0;  // stream records not applied (unknown format, unparsable)
  Relaxed<std::uint64_t> echoes_skipped = 0;  // own records whose early apply stood in stream order
  Relaxed<std::uint64_t> reconnects = 0;      // (re)subscriptions after the first
  // Readiness (docs/replication.md "Readiness"): the stream's last sequence
  // when this server first reached it (0 until then), and whether every
  // record up to it has been applied (or NATS was not reached in time).
  Relaxed<std::uint64_t> catch_up_target = 0;
  Relaxed<bool> caught_up = false;
  // Snapshots (docs/replication.md "Snapshots").
  Relaxed<std::uint64_t> snapshots_published = 0;
  Relaxed<std::uint64_t> snapshot_failures = 0;            // not published: error or too large
  Relaxed<std::uint64_t> snapshot_published_sequence = 0;  // stream sequence of the last published
  Relaxed<std::uint64_t> snapshot_loaded_sequence = 0;  // of the snapshot loaded at start (0: none)
  // docs/replication.md "A deleted or re-created stream", "Message ids".
  Relaxed<std::uint64_t> stream_resets = 0;   // streams found re-created: applied from the start
  Relaxed<std::uint64_t> duplicate_acks = 0;  // new batches the stream dropped as duplicates
};

class ReplicationStats {
 public:
  void set_enabled() { f_.enabled.store(true); }
  void set_connected(bool up) { f_.connected.store(up); }
  void set_applied_sequence(std::uint64_t seq) { f_.last_applied_sequence.store(seq); }
  void set_lag(std::uint64_t records) { f_.lag_records.store(records); }
  void set_pending(std::int64_t bytes, std::int64_t records) {
    f_.pending_bytes.store(bytes);
    f_.pending_records.store(records);
  }
  void add_published(std::uint64_t records = 1) { f_.published.add(records); }
  void add_publish_failure() { f_.publish_failures.add(1); }
  void add_dropped() { f_.dropped.add(1); }
  void add_applied(std::uint64_t records = 1) { f_.applied.add(records); }
  void add_skipped(std::uint64_t records = 1) { f_.skipped.add(records); }
  // The applier's running count (docs/replication.md "Applying the stream").
  void set_echoes_skipped(std::uint64_t records) { f_.echoes_skipped.store(records); }
  void add_reconnect() { f_.reconnects.add(1); }
  void set_catch_up_target(std::uint64_t seq) { f_.catch_up_target.store(seq); }
  void set_caught_up() { f_.caught_up.store(true); }
  void add_snapshot_published(std::uint64_t seq) {
    f_.snapshots_published.add(1);
    f_.snapshot_published_sequence.store(seq);
  }
  void add_snapshot_failure() { f_.snapshot_failures.add(1); }
  void set_snapshot_loaded(std::uint64_t seq) { f_.snapshot_loaded_sequence.store(seq); }
  void add_stream_reset() { f_.stream_resets.add(1); }
  // Returns the count with this one.
  std::uint64_t add_duplicate_ack() {
    f_.duplicate_acks.add(1);
    return f_.duplicate_acks.load();
  }

  // Each figure read on its own (relaxed), as a scrape needs them.
  ReplicationFigures figures() const { return f_; }

 private:
  ReplicationFigures f_;
};

// The replication_* families (docs/replication.md "Metrics"), one unlabelled
// family per figure, read from `stats` at each scrape and shown only once
// set_enabled() ran (--nats-url); `stats` must outlive the Registry.
metrics::Group metric_group(const ReplicationStats& stats);

}  // namespace ic::replication
