#include "replication/stats.hh"

#include <type_traits>

namespace ic::replication {

namespace {

// One unlabelled family of `figure`: a bool renders as 1 or 0, a signed
// figure as an integer, an unsigned one (counters, stream sequences) as a
// float, as the replication families always have.
template <typename T>
metrics::Family row(std::string_view name, std::string_view type, std::string_view help,
                    const ReplicationStats* s, Relaxed<T> ReplicationFigures::*figure) {
  return metrics::single(name, type, help, [s, figure] {
    const T value = (s->figures().*figure).load();
    if constexpr (std::is_same_v<T, bool>) {
      return value ? 1 : 0;
    } else if constexpr (std::is_signed_v<T>) {
      return value;
    } else {
      return static_cast<double>(value);
    }
  });
}

}  // namespace

metrics::Group metric_group(const ReplicationStats& stats) {
  const ReplicationStats* s = &stats;
  return metrics::Group{
      .name = "replication",
      .shown = [s] { return s->figures().enabled.load(); },
      .families = {
          // One family per line, however long its help.
          // clang-format off
          row("replication_connected", "gauge", "1 while connected to NATS with the replication stream subscribed.", s, &ReplicationFigures::connected),
          row("replication_last_applied_sequence", "gauge", "Stream sequence up to which every record is applied on every core.", s, &ReplicationFigures::last_applied_sequence),
          row("replication_lag_records", "gauge", "Stream records not yet applied here (last known; frozen while disconnected).", s, &ReplicationFigures::lag_records),
          row("replication_pending_bytes", "gauge", "Accepted changes buffered for publishing (queued or awaiting the stream's ack).", s, &ReplicationFigures::pending_bytes),
          row("replication_pending_records", "gauge", "Records behind replication_pending_bytes.", s, &ReplicationFigures::pending_records),
          row("replication_published_total", "counter", "Records the stream acknowledged (a republished duplicate counts again).", s, &ReplicationFigures::published),
          row("replication_publish_failures_total", "counter", "Publish attempts that failed or timed out; each is retried.", s, &ReplicationFigures::publish_failures),
          row("replication_dropped_total", "counter", "Accepted changes not buffered for publishing (--nats-buffer-bytes full): applied here only, other servers miss them.", s, &ReplicationFigures::dropped),
          row("replication_applied_total", "counter", "Stream records applied here.", s, &ReplicationFigures::applied),
          row("replication_skipped_total", "counter", "Stream records not applied: unparsable or of an unknown format version.", s, &ReplicationFigures::skipped),
          row("replication_echoes_skipped_total", "counter", "This server's own stream records not applied again: their early apply already stood in stream order.", s, &ReplicationFigures::echoes_skipped),
          row("replication_resubscribes_total", "counter", "Times the stream was subscribed again (reconnect, consumer loss).", s, &ReplicationFigures::reconnects),
          row("replication_catch_up_target_sequence", "gauge", "The stream's last sequence when this server first reached it; /readyz waits for it.", s, &ReplicationFigures::catch_up_target),
          row("replication_caught_up", "gauge", "1 once every record up to the catch-up target is applied (or NATS was not reached within --nats-startup-wait).", s, &ReplicationFigures::caught_up),
          row("replication_snapshots_published_total", "counter", "Index snapshots this server published to JetStream.", s, &ReplicationFigures::snapshots_published),
          row("replication_snapshot_failures_total", "counter", "Snapshots due but not published (JetStream error, or larger than --nats-snapshot-max-bytes).", s, &ReplicationFigures::snapshot_failures),
          row("replication_snapshot_published_sequence", "gauge", "Stream sequence covered by the last snapshot this server published.", s, &ReplicationFigures::snapshot_published_sequence),
          row("replication_snapshot_loaded_sequence", "gauge", "Stream sequence covered by the snapshot loaded at start (0: none).", s, &ReplicationFigures::snapshot_loaded_sequence),
          row("replication_stream_resets_total", "counter", "Times the stream was found deleted or re-created; the new one was applied from its first record.", s, &ReplicationFigures::stream_resets),
          row("replication_duplicate_acks_total", "counter", "New batches the stream dropped as duplicates (their message id published by someone else); each republished under a new id.", s, &ReplicationFigures::duplicate_acks),
          // clang-format on
      }};
}

}  // namespace ic::replication
