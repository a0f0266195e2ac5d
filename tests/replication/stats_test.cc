// The --state-file and --nats-url families, as their subsystems register them
// (persist/stats.hh, replication/stats.hh), in the order /metrics shows them.
#include <doctest/doctest.h>

#include <string>

#include "metrics/prometheus.hh"
#include "metrics/registry.hh"
#include "persist/stats.hh"
#include "replication/stats.hh"

using namespace ic::metrics;
using ic::persist::PersistStats;
using ic::replication::ReplicationStats;

TEST_CASE("--state-file and --nats-url figures render byte for byte") {
  PersistStats persist;
  persist.set_enabled();
  persist.record_load(0, 100000);
  persist.record_save(true, 1700000000.5, 0.0001, 1000000, 42);
  persist.record_save(false, 0, 0, 0, 0);
  ReplicationStats replication;
  replication.set_enabled();
  replication.set_connected(true);
  replication.set_applied_sequence(1000000);  // unsigned figures render as floats: 1e+06
  replication.set_lag(7);
  replication.set_pending(1000000, 3);  // signed ones as integers
  replication.add_published(100000);
  replication.add_publish_failure();
  replication.add_dropped();
  replication.add_applied(12);
  replication.add_skipped(2);
  replication.set_echoes_skipped(5);
  replication.add_reconnect();
  replication.set_catch_up_target(1000010);
  replication.add_snapshot_published(999);
  replication.add_snapshot_failure();
  replication.set_snapshot_loaded(500);
  replication.add_stream_reset();
  replication.add_duplicate_ack();
  replication.add_duplicate_ack();
  // Registered as the composition root does (server/app.cc register_metrics).
  Registry registry(1);
  registry.add_group(ic::persist::metric_group(persist));
  registry.add_group(ic::replication::metric_group(replication));
  const std::string rendered =
      render_prometheus(Sample{}, ProcessFigures{}, registry.registrations());
  const std::string expected =
      "# HELP inferencecache_state_loads_total Startup loads of --state-file by result (ok, "
      "missing, unreadable, wrong_version, truncated, corrupt); anything but ok starts the index "
      "cold.\n"
      "# TYPE inferencecache_state_loads_total counter\n"
      "inferencecache_state_loads_total{result=\"ok\"} 1\n"
      "# HELP inferencecache_state_restored_entries (key, replica) entries restored from "
      "--state-file at startup.\n"
      "# TYPE inferencecache_state_restored_entries gauge\n"
      "inferencecache_state_restored_entries 100000\n"
      "# HELP inferencecache_state_saves_total State file saves by result (ok, error).\n"
      "# TYPE inferencecache_state_saves_total counter\n"
      "inferencecache_state_saves_total{result=\"ok\"} 1\n"
      "inferencecache_state_saves_total{result=\"error\"} 1\n"
      "# HELP inferencecache_state_last_save_timestamp_seconds Unix time the last good state file "
      "was written; 0 = none yet.\n"
      "# TYPE inferencecache_state_last_save_timestamp_seconds gauge\n"
      "inferencecache_state_last_save_timestamp_seconds 1.7000000005e+09\n"
      "# HELP inferencecache_state_last_save_duration_seconds Wall time of the last good save, "
      "from the first slice to the rename.\n"
      "# TYPE inferencecache_state_last_save_duration_seconds gauge\n"
      "inferencecache_state_last_save_duration_seconds 0.0001\n"
      "# HELP inferencecache_state_last_save_bytes Size of the last good state file in bytes.\n"
      "# TYPE inferencecache_state_last_save_bytes gauge\n"
      "inferencecache_state_last_save_bytes 1000000\n"
      "# HELP inferencecache_state_last_save_entries (key, replica) entries in the last good state "
      "file.\n"
      "# TYPE inferencecache_state_last_save_entries gauge\n"
      "inferencecache_state_last_save_entries 42\n"
      "# HELP inferencecache_replication_connected 1 while connected to NATS with the replication "
      "stream subscribed.\n"
      "# TYPE inferencecache_replication_connected gauge\n"
      "inferencecache_replication_connected 1\n"
      "# HELP inferencecache_replication_last_applied_sequence Stream sequence up to which every "
      "record is applied on every core.\n"
      "# TYPE inferencecache_replication_last_applied_sequence gauge\n"
      "inferencecache_replication_last_applied_sequence 1e+06\n"
      "# HELP inferencecache_replication_lag_records Stream records not yet applied here (last "
      "known; frozen while disconnected).\n"
      "# TYPE inferencecache_replication_lag_records gauge\n"
      "inferencecache_replication_lag_records 7\n"
      "# HELP inferencecache_replication_pending_bytes Accepted changes buffered for publishing "
      "(queued or awaiting the stream's ack).\n"
      "# TYPE inferencecache_replication_pending_bytes gauge\n"
      "inferencecache_replication_pending_bytes 1000000\n"
      "# HELP inferencecache_replication_pending_records Records behind "
      "replication_pending_bytes.\n"
      "# TYPE inferencecache_replication_pending_records gauge\n"
      "inferencecache_replication_pending_records 3\n"
      "# HELP inferencecache_replication_published_total Records the stream acknowledged (a "
      "republished duplicate counts again).\n"
      "# TYPE inferencecache_replication_published_total counter\n"
      "inferencecache_replication_published_total 100000\n"
      "# HELP inferencecache_replication_publish_failures_total Publish attempts that failed or "
      "timed out; each is retried.\n"
      "# TYPE inferencecache_replication_publish_failures_total counter\n"
      "inferencecache_replication_publish_failures_total 1\n"
      "# HELP inferencecache_replication_dropped_total Accepted changes not buffered for "
      "publishing (--nats-buffer-bytes full): applied here only, other servers miss them.\n"
      "# TYPE inferencecache_replication_dropped_total counter\n"
      "inferencecache_replication_dropped_total 1\n"
      "# HELP inferencecache_replication_applied_total Stream records applied here.\n"
      "# TYPE inferencecache_replication_applied_total counter\n"
      "inferencecache_replication_applied_total 12\n"
      "# HELP inferencecache_replication_skipped_total Stream records not applied: unparsable or "
      "of an unknown format version.\n"
      "# TYPE inferencecache_replication_skipped_total counter\n"
      "inferencecache_replication_skipped_total 2\n"
      "# HELP inferencecache_replication_echoes_skipped_total This server's own stream records "
      "not applied again: their early apply already stood in stream order.\n"
      "# TYPE inferencecache_replication_echoes_skipped_total counter\n"
      "inferencecache_replication_echoes_skipped_total 5\n"
      "# HELP inferencecache_replication_resubscribes_total Times the stream was subscribed again "
      "(reconnect, consumer loss).\n"
      "# TYPE inferencecache_replication_resubscribes_total counter\n"
      "inferencecache_replication_resubscribes_total 1\n"
      "# HELP inferencecache_replication_catch_up_target_sequence The stream's last sequence when "
      "this server first reached it; /readyz waits for it.\n"
      "# TYPE inferencecache_replication_catch_up_target_sequence gauge\n"
      "inferencecache_replication_catch_up_target_sequence 1.00001e+06\n"
      "# HELP inferencecache_replication_caught_up 1 once every record up to the catch-up target "
      "is applied (or NATS was not reached within --nats-startup-wait).\n"
      "# TYPE inferencecache_replication_caught_up gauge\n"
      "inferencecache_replication_caught_up 0\n"
      "# HELP inferencecache_replication_snapshots_published_total Index snapshots this server "
      "published to JetStream.\n"
      "# TYPE inferencecache_replication_snapshots_published_total counter\n"
      "inferencecache_replication_snapshots_published_total 1\n"
      "# HELP inferencecache_replication_snapshot_failures_total Snapshots due but not published "
      "(JetStream error, or larger than --nats-snapshot-max-bytes).\n"
      "# TYPE inferencecache_replication_snapshot_failures_total counter\n"
      "inferencecache_replication_snapshot_failures_total 1\n"
      "# HELP inferencecache_replication_snapshot_published_sequence Stream sequence covered by "
      "the last snapshot this server published.\n"
      "# TYPE inferencecache_replication_snapshot_published_sequence gauge\n"
      "inferencecache_replication_snapshot_published_sequence 999\n"
      "# HELP inferencecache_replication_snapshot_loaded_sequence Stream sequence covered by the "
      "snapshot loaded at start (0: none).\n"
      "# TYPE inferencecache_replication_snapshot_loaded_sequence gauge\n"
      "inferencecache_replication_snapshot_loaded_sequence 500\n"
      "# HELP inferencecache_replication_stream_resets_total Times the stream was found deleted or "
      "re-created; the new one was applied from its first record.\n"
      "# TYPE inferencecache_replication_stream_resets_total counter\n"
      "inferencecache_replication_stream_resets_total 1\n"
      "# HELP inferencecache_replication_duplicate_acks_total New batches the stream dropped as "
      "duplicates (their message id published by someone else); each republished under a new "
      "id.\n"
      "# TYPE inferencecache_replication_duplicate_acks_total counter\n"
      "inferencecache_replication_duplicate_acks_total 2\n"
      "# HELP inferencecache_index_entries ";
  CHECK(rendered.find(expected) != std::string::npos);
}
