#pragma once
// Replication through NATS JetStream (docs/replication.md). Every change this
// server accepts (ReportCacheState message, PublishEvent, policy) is encoded
// on the accepting reactor and offered to a bounded Outbox (never blocking);
// one thread of its own runs the NATS client: it publishes the outbox to the
// stream "<stream>.changes" (asynchronous JetStream publishes, message id =
// origin:sequence) and applies the whole stream, its own records included, in
// stream order through the Applier. All servers so fold the same sequence of
// changes and converge to the same index.
//
// NATS unreachable: lookups and ingest go on locally; the outbox keeps what
// it can (--nats-buffer-bytes, then drops are counted); the NATS library
// reconnects forever, and the thread then republishes the outbox and
// resubscribes after the last applied sequence (catch-up).

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "persist/state_saver.hh"
#include "replication/applier.hh"
#include "replication/log_backoff.hh"
#include "replication/nats_creds.hh"
#include "replication/nats_tls.hh"
#include "replication/outbox.hh"
#include "replication/record.hh"
#include "replication/stats.hh"
#include "sharding/change_observer.hh"
#include "sharding/sharded_index.hh"

namespace ic::replication {

class StateStore;
enum class KeptDocument;  // replication/state_store.hh

struct ReplicatorOptions {
  std::string url;                                   // --nats-url: "nats://host:4222[,nats://...]"
  std::string stream;                                // --nats-stream
  NatsTls tls;                                       // --nats-tls-*
  std::string creds_file;                            // --nats-creds-file; "" = none
  std::size_t buffer_bytes = std::size_t{64} << 20;  // --nats-buffer-bytes
  // MaxAge of the stream when this server creates it (µs; the index TTL:
  // older changes have expired anyway). An existing stream is used as is.
  std::int64_t max_age_us = 30 * 60 * 1'000'000LL;
  // Stream records up to this sequence are in the loaded state file.
  std::uint64_t resume_after = 0;
  // The creation time (ns) of the stream that position belongs to; 0 =
  // unknown (an older file). A stream found with another one is a different
  // stream: it is applied from its first record (docs/replication.md "A
  // deleted or re-created stream").
  std::int64_t resume_stream_created_ns = 0;
  // Readiness (docs/replication.md "Readiness"): called once (replication
  // thread) when every record up to the stream's last sequence at the first
  // contact is applied, or when NATS was not reached within startup_wait_us.
  std::function<void()> on_caught_up;
  // Replication thread: another server's prompt-template document (record
  // `sequence`), to parse and install on every core (docs/templates.md
  // "Replication"). Empty: template records are passed over.
  std::function<void(std::uint64_t sequence, const std::string& templates_json)> on_templates;
  std::int64_t startup_wait_us = 30 * 1'000'000LL;
  // Snapshots (docs/replication.md "Snapshots"): at most one publication per
  // interval (0 = never), none larger than max bytes.
  std::int64_t snapshot_interval_us = 300 * 1'000'000LL;
  std::uint64_t snapshot_max_bytes = std::uint64_t{256} << 20;
};

class Replicator final : public sharding::ChangeObserver {
 public:
  // `router` and `stats` outlive the replicator.
  Replicator(ReplicatorOptions options, sharding::ShardedIndex& router, ReplicationStats& stats);
  ~Replicator() override;  // stop()s
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Starts the NATS thread (after the runtime started: it posts to cores).
  void start();
  // Publishes what is buffered (at most ~2 s while connected), stops the
  // thread and waits for the records posted to cores to run. Call before the
  // runtime stops.
  void stop();

  // ChangeObserver (reactor threads): stamp, encode, offer to the outbox;
  // the record's origin_sequence, 0 when the outbox dropped it.
  std::uint64_t accepted(pb::CacheStateUpdate& update) override;
  std::uint64_t accepted(pb::CacheEvent& event) override;
  // ChangeObserver (owner core): the core's echo filter decides.
  bool early_apply(unsigned core, std::string_view tenant_id, std::uint64_t sequence) override {
    return applier_.early_apply(core, tenant_id, sequence);
  }
  // A policy document this server accepted (/policy, --policy-file). Any thread.
  void accepted_policy(std::string_view policy_json);
  // A prompt-template document this server accepted (/templates,
  // --templates-file). Any thread.
  void accepted_templates(std::string_view templates_json);

  // The state saver's thread, after a periodic save of `state_file`:
  // publishes it as the group's snapshot when one is due (interval passed,
  // no newer one from another server, size within bounds, connected).
  void publish_snapshot(const std::string& state_file);

  // The position a state file saved now includes (any thread).
  persist::StreamPosition position() const;
  // One line for /readyz: connection, catch-up, applied sequence, lag,
  // buffered changes.
  std::string readiness_detail() const;

  // The stream's answer to one published batch of records first..last (NATS
  // library thread): forget them, or queue the records of `body` again.
  // `duplicate`: JetStream stored nothing, having seen the message id before
  // (docs/replication.md "Message ids").
  void settle(std::uint64_t first, std::uint64_t last, bool ok, bool duplicate,
              std::string_view body);
  const std::string& origin() const { return encoder_.origin(); }

 private:
  struct Nats;
  template <typename Change>
  std::uint64_t accept(Change& change);
  bool offer(std::uint64_t sequence, std::string body);
  void run();
  bool set_up();
  bool jetstream_enabled();
  void note_problem(const std::string& problem);
  void clear_problem();
  bool ensure_stream();
  void check_identity(std::int64_t created_ns, std::uint64_t first_sequence);
  void check_stream();
  void requeue(std::string_view body);
  bool subscribe();
  void publish_some();
  void receive_some();
  std::size_t receive_round();
  std::size_t post_queued();
  bool in_order(const jsMsgMetaData& meta);
  bool publish_batch(std::uint64_t first, std::uint64_t last, const std::string& body);
  void apply_message(std::uint64_t sequence, natsMsg* msg);
  void update_stats();
  void set_catch_up_target(std::uint64_t last_sequence, std::uint64_t messages);
  void check_caught_up();
  void keep_document(KeptDocument kind, std::uint64_t sequence,
                     const state_pb::ReplicationRecord& record, const std::string& json);
  bool snapshot_due(StateStore& store, std::int64_t now_us, std::uint64_t sequence);

  ReplicatorOptions options_;
  std::string subject_;
  sharding::ShardedIndex& router_;
  ReplicationStats& stats_;
  RecordEncoder encoder_;
  Outbox outbox_;
  Applier applier_;
  std::unique_ptr<Nats> nats_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> need_setup_{true};
  std::atomic<bool> connected_{false};
  // Catch-up (replication thread only, but for the published stats).
  bool target_known_ = false;
  std::uint64_t target_ = 0;
  bool caught_up_ = false;
  std::chrono::steady_clock::time_point started_at_{};
  std::int64_t last_snapshot_us_ = 0;  // state saver's thread only
  // The stream's identity (its creation time, ns) this position belongs to.
  std::atomic<std::int64_t> stream_created_ns_{0};
  std::chrono::steady_clock::time_point stream_checked_at_{};  // replication thread
  bool stream_missing_logged_ = false;                         // replication thread
  // Message ids (docs/replication.md "Message ids"): the highest origin
  // sequence ever published twice (a duplicate ack at or below it may be a
  // retry's), and the id suffix, bumped when a new batch was taken for a
  // duplicate (its id published by someone else).
  std::atomic<std::uint64_t> requeued_through_{0};
  std::atomic<std::uint64_t> id_epoch_{0};
  std::vector<Received> received_;  // replication thread: one message's records
  // Replication thread: records since the last mi_collect, and when the last
  // one arrived (a burst's end returns its memory, replicator.cc).
  std::uint64_t applied_since_collect_ = 0;
  std::chrono::steady_clock::time_point last_received_at_{};
  // Replication thread: a fetch failed (consumer or stream gone); set up again
  // from this time on ({} = nothing pending).
  std::chrono::steady_clock::time_point resubscribe_at_{};
  // Replication thread: the consumer sequence of the last message taken from
  // this subscription (0 = none yet); a jump means deliveries were lost.
  std::uint64_t consumer_sequence_ = 0;
  // Why the stream is not set up while NATS is up ("" = nothing known); /readyz reads it.
  mutable std::mutex problem_mutex_;
  std::string problem_;
  // The problem's log lines (replication thread): the last one logged and its backoff; the
  // "stream not available" lines' backoff.
  std::string logged_problem_;
  LogBackoff problem_log_;
  LogBackoff stream_log_;
  std::thread thread_;
};

}  // namespace ic::replication
