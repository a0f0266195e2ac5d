#pragma once
// Figures of the NATS JetStream replication (docs/replication.md "Metrics"):
// written by the replication thread, the NATS library's callbacks and the
// reactors offering changes; read by scrapes and /readyz on any core.
// Relaxed atomics: each figure stands alone.

#include <atomic>
#include <cstdint>

namespace ic::metrics {

// Plain copy for one scrape.
struct ReplicationFigures {
  bool enabled = false;                     // --nats-url given
  bool connected = false;                   // the NATS connection is up and the stream subscribed
  std::uint64_t last_applied_sequence = 0;  // stream sequence applied on every core
  std::uint64_t lag_records = 0;            // stream records not yet applied here (last known)
  std::int64_t pending_bytes = 0;           // changes buffered for publishing (queued + unacked)
  std::int64_t pending_records = 0;
  std::uint64_t published = 0;         // records the stream acknowledged
  std::uint64_t publish_failures = 0;  // publish attempts that failed (retried)
  std::uint64_t dropped = 0;           // changes not buffered (buffer full): applied locally only
  std::uint64_t applied = 0;           // stream records applied
  std::uint64_t skipped = 0;           // stream records not applied (unknown format, unparsable)
  std::uint64_t echoes_skipped = 0;    // own records whose early apply stood in stream order
  std::uint64_t reconnects = 0;        // (re)subscriptions after the first
  // Readiness (docs/replication.md "Readiness"): the stream's last sequence
  // when this server first reached it (0 until then), and whether every
  // record up to it has been applied (or NATS was not reached in time).
  std::uint64_t catch_up_target = 0;
  bool caught_up = false;
  // Snapshots (docs/replication.md "Snapshots").
  std::uint64_t snapshots_published = 0;
  std::uint64_t snapshot_failures = 0;            // not published: error or too large
  std::uint64_t snapshot_published_sequence = 0;  // stream sequence of the last published
  std::uint64_t snapshot_loaded_sequence = 0;     // of the snapshot loaded at start (0: none)
};

class ReplicationStats {
 public:
  void set_enabled() { enabled_.store(true, std::memory_order_relaxed); }
  void set_connected(bool up) { connected_.store(up, std::memory_order_relaxed); }
  void set_applied_sequence(std::uint64_t seq) {
    applied_seq_.store(seq, std::memory_order_relaxed);
  }
  void set_lag(std::uint64_t records) { lag_.store(records, std::memory_order_relaxed); }
  void set_pending(std::int64_t bytes, std::int64_t records) {
    pending_bytes_.store(bytes, std::memory_order_relaxed);
    pending_records_.store(records, std::memory_order_relaxed);
  }
  void add_published(std::uint64_t records = 1) {
    published_.fetch_add(records, std::memory_order_relaxed);
  }
  void add_publish_failure() { failures_.fetch_add(1, std::memory_order_relaxed); }
  void add_dropped() { dropped_.fetch_add(1, std::memory_order_relaxed); }
  void add_applied(std::uint64_t records = 1) {
    applied_.fetch_add(records, std::memory_order_relaxed);
  }
  void add_skipped(std::uint64_t records = 1) {
    skipped_.fetch_add(records, std::memory_order_relaxed);
  }
  // The applier's running count (docs/replication.md "Applying the stream").
  void set_echoes_skipped(std::uint64_t records) {
    echoes_skipped_.store(records, std::memory_order_relaxed);
  }
  void add_reconnect() { reconnects_.fetch_add(1, std::memory_order_relaxed); }
  void set_catch_up_target(std::uint64_t seq) {
    catch_up_target_.store(seq, std::memory_order_relaxed);
  }
  void set_caught_up() { caught_up_.store(true, std::memory_order_relaxed); }
  void add_snapshot_published(std::uint64_t seq) {
    snapshots_published_.fetch_add(1, std::memory_order_relaxed);
    snapshot_published_seq_.store(seq, std::memory_order_relaxed);
  }
  void add_snapshot_failure() { snapshot_failures_.fetch_add(1, std::memory_order_relaxed); }
  void set_snapshot_loaded(std::uint64_t seq) {
    snapshot_loaded_seq_.store(seq, std::memory_order_relaxed);
  }

  ReplicationFigures figures() const {
    return ReplicationFigures{
        .enabled = enabled_.load(std::memory_order_relaxed),
        .connected = connected_.load(std::memory_order_relaxed),
        .last_applied_sequence = applied_seq_.load(std::memory_order_relaxed),
        .lag_records = lag_.load(std::memory_order_relaxed),
        .pending_bytes = pending_bytes_.load(std::memory_order_relaxed),
        .pending_records = pending_records_.load(std::memory_order_relaxed),
        .published = published_.load(std::memory_order_relaxed),
        .publish_failures = failures_.load(std::memory_order_relaxed),
        .dropped = dropped_.load(std::memory_order_relaxed),
        .applied = applied_.load(std::memory_order_relaxed),
        .skipped = skipped_.load(std::memory_order_relaxed),
        .echoes_skipped = echoes_skipped_.load(std::memory_order_relaxed),
        .reconnects = reconnects_.load(std::memory_order_relaxed),
        .catch_up_target = catch_up_target_.load(std::memory_order_relaxed),
        .caught_up = caught_up_.load(std::memory_order_relaxed),
        .snapshots_published = snapshots_published_.load(std::memory_order_relaxed),
        .snapshot_failures = snapshot_failures_.load(std::memory_order_relaxed),
        .snapshot_published_sequence = snapshot_published_seq_.load(std::memory_order_relaxed),
        .snapshot_loaded_sequence = snapshot_loaded_seq_.load(std::memory_order_relaxed),
    };
  }

 private:
  std::atomic<bool> enabled_{false};
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> applied_seq_{0};
  std::atomic<std::uint64_t> lag_{0};
  std::atomic<std::int64_t> pending_bytes_{0};
  std::atomic<std::int64_t> pending_records_{0};
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> applied_{0};
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> echoes_skipped_{0};
  std::atomic<std::uint64_t> reconnects_{0};
  std::atomic<std::uint64_t> catch_up_target_{0};
  std::atomic<bool> caught_up_{false};
  std::atomic<std::uint64_t> snapshots_published_{0};
  std::atomic<std::uint64_t> snapshot_failures_{0};
  std::atomic<std::uint64_t> snapshot_published_seq_{0};
  std::atomic<std::uint64_t> snapshot_loaded_seq_{0};
};

}  // namespace ic::metrics
