#include "replication/replicator.hh"

#include <mimalloc.h>
#include <nats/nats.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/log.hh"
#include "replication/snapshot.hh"
#include "replication/state_store.hh"

namespace ic::replication {
namespace {

using base::LogLevel;
using namespace std::chrono_literals;

constexpr std::size_t kPublishBatch = 512;                   // records per publish round
constexpr std::size_t kBatchRecords = 256;                   // records per stream message
constexpr std::size_t kBatchBytes = std::size_t{256} << 10;  // body bytes per stream message
constexpr int kReceiveBatch = 1024;                          // messages per fetch
// What one fetch asks for at least (docs/replication.md "Applying the
// stream"); it asks for the connection's max payload (plus headers) when that
// is more, so any message fits in one (JetStream refuses a message larger
// than the fetch). The server sends no more than a fetch asks for, so a burst
// or a catch-up waits in the stream, not in this process.
constexpr std::int64_t kRoundBytes = std::int64_t{256} << 10;
constexpr int kFetchHeaderBytes = 4096;  // a message's headers and subject beside its payload
// Records posted to the cores and not yet run; past it the thread waits.
constexpr std::int64_t kMaxInFlight = 512;
// An ephemeral pull consumer nobody fetches from for this long is deleted by
// the server (a server gone for good leaves nothing behind), ns.
constexpr std::int64_t kConsumerInactiveNs = 60LL * 1'000'000'000;
// A burst (at least this many records applied) followed by this long without
// a record hands the free pages it left in this thread's and the cores' heaps
// back to the system (mi_collect): mimalloc returns a thread's freed pages only
// when that thread allocates again, and after a burst they go quiet.
constexpr std::uint64_t kCollectAfterRecords = 4096;
constexpr auto kCollectWhenQuiet = 1s;
constexpr int64_t kIdleWaitMs = 5;          // receive wait when nothing arrives
constexpr int64_t kAckWaitMs = 5000;        // then a publish counts as failed
constexpr int64_t kJsApiWaitMs = 2000;      // JetStream API requests
constexpr int64_t kMaxAsyncPending = 8192;  // publishes awaiting acks in the library
constexpr auto kFlushAtStop = 2s;           // publishing what is buffered at stop
// A set-up that failed while NATS is up (JetStream off, the stream refused) is retried after
// this, doubled per failure up to the max; a reconnection starts over.
constexpr auto kSetupRetryFirst = 250ms;
constexpr auto kSetupRetryMax = 10s;
// A repeated log line (the same set-up problem, the stream refused, the connection lost) goes
// out again after this, doubled per line up to the max (LogBackoff, µs).
constexpr std::int64_t kLogBackoffFirstUs = 10'000'000;
constexpr std::int64_t kLogBackoffMaxUs = 300'000'000;
const char* const kNoJetStream =
    "NATS reached, but JetStream is not enabled on it (start nats-server with -js, "
    "docs/replication.md)";
const char* const kNotSetUp = "NATS reached, but the stream is not set up yet (see the log)";
constexpr std::int64_t kDuplicateWindowNs = 120LL * 1'000'000'000;  // JetStream default
const char* const kMsgIdHeader = "Nats-Msg-Id";

constexpr auto kStreamCheckInterval = 1s;  // how often the stream's identity is looked at

// 64 random bits as 16 hex digits (getrandom; a clock/address mix if refused).
std::string nonce() {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    v = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        reinterpret_cast<std::uintptr_t>(&v);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(v));
  return hex;
}

// Host, pid, start time and a random nonce: unique across restarts, and its
// message ids not guessable by someone who cannot read the stream
// (docs/replication.md "Message ids").
std::string unique_origin() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const auto start = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  return std::string(host[0] != '\0' ? host : "server") + "/" + std::to_string(::getpid()) + "/" +
         std::to_string(start) + "/" + nonce();
}

std::string status_text(natsStatus s) {
  std::string text = natsStatus_GetText(s);
  if (const char* last = nats_GetLastError(nullptr); last != nullptr && *last != '\0') {
    text += ": ";
    text += last;
  }
  return text;
}

void ack_bridge(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* error, void* closure) {
  auto* self = static_cast<Replicator*>(closure);
  const char* id = nullptr;
  std::uint64_t first = 0, last = 0;
  if (natsMsgHeader_Get(msg, kMsgIdHeader, &id) == NATS_OK && id != nullptr &&
      batch_range(id, self->origin(), &first, &last)) {
    const bool ok = ack != nullptr && error == nullptr;
    self->settle(first, last, ok, ok && ack->Duplicate,
                 std::string_view(natsMsg_GetData(msg),
                                  static_cast<std::size_t>(natsMsg_GetDataLength(msg))));
  }
  natsMsg_Destroy(msg);
}

// A flapping connection: "lost" lines with backoff; "connected" is logged when the last line
// said "lost" (or at the first connect), so the log never ends on a state that is over.
LogBackoff g_disconnect_log(kLogBackoffFirstUs, kLogBackoffMaxUs);
std::atomic<bool> g_said_lost{true};  // true before the first connect

// The connection came up (first connect or reconnect): the stream set-up runs again.
void on_reconnected(natsConnection* conn, void* closure) {
  static_cast<std::atomic<bool>*>(closure)->store(true);
  if (!g_said_lost.exchange(false)) return;
  char url[256] = {};
  natsConnection_GetConnectedUrl(conn, url, sizeof url);
  base::log(LogLevel::info, "replication: NATS connected", {{"url", std::string(url)}});
}

void on_disconnected(natsConnection*, void*) {
  std::uint64_t suppressed = 0;
  if (g_disconnect_log.allow(base::log_clock_us(), &suppressed)) {
    g_said_lost.store(true);
    base::log(LogLevel::warn,
              "replication: NATS connection lost; reconnecting, serving from local state",
              {{"suppressed", suppressed}});
  }
}

// JetStream answers nothing on this server (-js not given) or for this account.
bool jetstream_off(natsStatus s, jsErrCode code) {
  return s == NATS_NO_RESPONDERS || code == JSNotEnabledErr || code == JSNotEnabledForAccountErr;
}

}  // namespace

// The NATS client objects, owned by the replication thread after start().
struct Replicator::Nats {
  natsOptions* options = nullptr;
  natsConnection* conn = nullptr;
  jsCtx* js = nullptr;
  natsSubscription* sub = nullptr;
  ~Nats() {
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(conn);
    natsOptions_Destroy(options);
  }
};

Replicator::Replicator(ReplicatorOptions options, sharding::ShardedIndex& router,
                       ReplicationStats& stats)
    : options_(std::move(options)),
      subject_(options_.stream + ".changes"),
      router_(router),
      stats_(stats),
      encoder_(unique_origin()),
      outbox_(options_.buffer_bytes),
      applier_(router, encoder_.origin(), kMaxInFlight),
      problem_log_(kLogBackoffFirstUs, kLogBackoffMaxUs),
      stream_log_(kLogBackoffFirstUs, kLogBackoffMaxUs) {
  applier_.resume_after(options_.resume_after);
  stream_created_ns_.store(options_.resume_stream_created_ns);
  stats_.set_enabled();
  stats_.set_applied_sequence(options_.resume_after);
}

Replicator::~Replicator() { stop(); }

// An update or event: stamped with the acceptance time when it has none,
// encoded, offered.
template <typename Change>
std::uint64_t Replicator::accept(Change& change) {
  const std::int64_t now = router_.clock().wall_us();
  if (change.timestamp_us() == 0) change.set_timestamp_us(now);
  std::uint64_t sequence = 0;
  std::string body = encoder_.encode(change, now, &sequence);
  return offer(sequence, std::move(body)) ? sequence : 0;
}

std::uint64_t Replicator::accepted(pb::CacheStateUpdate& update) { return accept(update); }

std::uint64_t Replicator::accepted(pb::CacheEvent& event) { return accept(event); }

void Replicator::accepted_policy(std::string_view policy_json) {
  std::uint64_t sequence = 0;
  std::string body = encoder_.encode_policy(policy_json, router_.clock().wall_us(), &sequence);
  offer(sequence, std::move(body));
}

void Replicator::accepted_templates(std::string_view templates_json) {
  std::uint64_t sequence = 0;
  std::string body =
      encoder_.encode_templates(templates_json, router_.clock().wall_us(), &sequence);
  offer(sequence, std::move(body));
}

bool Replicator::offer(std::uint64_t sequence, std::string body) {
  if (outbox_.offer(sequence, std::move(body))) return true;
  stats_.add_dropped();
  return false;
}

void Replicator::settle(std::uint64_t first, std::uint64_t last, bool ok, bool duplicate,
                        std::string_view body) {
  // A duplicate is a retry's when one of its records was published before;
  // a new batch taken for a duplicate was stored by no one: its id had been
  // published by someone else. Republished under a new id suffix.
  if (duplicate && first > requeued_through_.load()) {
    const std::uint64_t n = stats_.add_duplicate_ack();
    id_epoch_.fetch_add(1);
    if ((n & (n - 1)) == 0) {  // 1, 2, 4, 8, ...: a flood of them is not a flood of lines
      base::log(LogLevel::error,
                "replication: a new batch was dropped as a duplicate (its message id was "
                "published by someone else); republishing it under a new id",
                {{"first", first}, {"last", last}, {"duplicates", n}});
    }
    requeue(body);
    return;
  }
  if (ok) {
    stats_.add_published(outbox_.acked(first, last));
    return;
  }
  stats_.add_publish_failure();
  for (std::uint64_t seen = requeued_through_.load();
       last > seen && !requeued_through_.compare_exchange_weak(seen, last);) {
  }
  requeue(body);
}

// Back to the queue record by record (rare: re-serializing is fine).
void Replicator::requeue(std::string_view body) {
  state_pb::ReplicationBatch batch;
  if (!batch.ParseFromArray(body.data(), static_cast<int>(body.size()))) return;
  for (const state_pb::ReplicationRecord& r : batch.records()) {
    outbox_.failed(Outbox::Item{r.origin_sequence(), r.SerializeAsString()});
  }
}

persist::StreamPosition Replicator::position() const {
  // The identity first: a reset stores it after moving the applier back, so
  // a position never pairs the new stream with the old one's sequence.
  const std::int64_t created = stream_created_ns_.load();
  return persist::StreamPosition{options_.stream, applier_.applied_through(), created};
}

std::string Replicator::readiness_detail() const {
  const ReplicationFigures f = stats_.figures();
  std::string line = "replication: ";
  if (f.connected) {
    line += "connected";
  } else {
    std::lock_guard lock(problem_mutex_);
    line += problem_.empty() ? "NATS unreachable" : problem_;
    line += ", serving from local state";
  }
  if (!f.caught_up && f.catch_up_target == 0 && !f.connected) {
    line += ", waiting for the stream (at most " +
            std::to_string(options_.startup_wait_us / 1'000'000) + " s)";
  } else if (!f.caught_up) {
    const std::uint64_t gap = f.catch_up_target > f.last_applied_sequence
                                  ? f.catch_up_target - f.last_applied_sequence
                                  : 0;
    line += ", catching up to " + std::to_string(f.catch_up_target) + " (" + std::to_string(gap) +
            " records to apply)";
  }
  line += ", stream " + options_.stream + " applied through " +
          std::to_string(f.last_applied_sequence) + ", lag " + std::to_string(f.lag_records) +
          " records, " + std::to_string(f.pending_records) + " changes to publish, " +
          std::to_string(f.dropped) + " dropped";
  if (f.stream_resets > 0) {
    line += ", stream deleted or re-created " + std::to_string(f.stream_resets) +
            " times: applied again from its first record";
  }
  return line;
}

void Replicator::start() {
  nats_ = std::make_unique<Nats>();
  natsOptions_Create(&nats_->options);
  natsOptions* o = nats_->options;
  natsOptions_SetURL(o, options_.url.c_str());
  if (std::string error = apply_tls(o, options_.tls); !error.empty()) {
    base::log(LogLevel::error, "replication: NATS TLS options not usable", {{"error", error}});
  }
  if (!options_.creds_file.empty()) {
    if (std::string error = apply_creds(o, options_.creds_file); !error.empty()) {
      base::log(LogLevel::error, "replication: NATS credentials not usable", {{"error", error}});
    }
  }
  natsOptions_SetName(o, "inferencecache-server");
  natsOptions_SetMaxReconnect(o, -1);  // forever: NATS may be away for long
  natsOptions_SetReconnectWait(o, 250);
  natsOptions_SetTimeout(o, 2000);
  natsOptions_SetPingInterval(o, 2000);
  natsOptions_SetMaxPingsOut(o, 2);
  // With a callback the first connect is asynchronous: NATS away at start
  // must not hold the main thread (without one the call retries forever).
  natsOptions_SetRetryOnFailedConnect(o, true, on_reconnected, &need_setup_);
  natsOptions_SetReconnectedCB(o, on_reconnected, &need_setup_);
  natsOptions_SetDisconnectedCB(o, on_disconnected, nullptr);
  const natsStatus s = natsConnection_Connect(&nats_->conn, o);
  if (s == NATS_OK) {
    on_reconnected(nats_->conn, &need_setup_);  // connected at once: no callback says it
  } else if (s != NATS_NOT_YET_CONNECTED) {
    base::log(LogLevel::warn, "replication: NATS connection not created",
              {{"url", options_.url}, {"error", status_text(s)}});
  }
  base::log(LogLevel::info, "replication starting",
            {{"url", options_.url},
             {"stream", options_.stream},
             {"origin", encoder_.origin()},
             {"resume_after", options_.resume_after}});
  started_at_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

void Replicator::stop() {
  if (!thread_.joinable()) return;
  const auto until = std::chrono::steady_clock::now() + kFlushAtStop;
  while (connected_.load() && outbox_.records() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  stopping_.store(true);
  thread_.join();
  if (!applier_.drain(5s)) {
    base::log(LogLevel::warn, "replication: records still queued to cores at stop");
  }
  nats_.reset();
  nats_CloseAndWait(2000);
  update_stats();
}

void Replicator::run() {
  auto retry_at = std::chrono::steady_clock::time_point{};
  auto retry_after = std::chrono::steady_clock::duration{kSetupRetryFirst};
  while (!stopping_.load(std::memory_order_relaxed)) {
    const bool up =
        nats_->conn != nullptr && natsConnection_Status(nats_->conn) == NATS_CONN_STATUS_CONNECTED;
    const auto now = std::chrono::steady_clock::now();
    if (!up) {
      retry_at = {};
      retry_after = kSetupRetryFirst;
      clear_problem();  // the log backoff stays: a flapping connection does not reset it
    } else if (need_setup_.load() && now >= retry_at) {
      if (set_up()) {
        retry_after = kSetupRetryFirst;
        clear_problem();
      } else {
        retry_at = now + retry_after;
        retry_after =
            std::min<std::chrono::steady_clock::duration>(retry_after * 2, kSetupRetryMax);
      }
    }
    if (!up || need_setup_.load()) {
      connected_.store(false);
      update_stats();
      check_caught_up();
      std::this_thread::sleep_for(50ms);
      continue;
    }
    connected_.store(true);
    publish_some();
    receive_some();
    check_stream();
    update_stats();
    check_caught_up();
  }
  connected_.store(false);
}

void Replicator::update_stats() {
  stats_.set_connected(connected_.load());
  stats_.set_applied_sequence(applier_.applied_through());
  stats_.set_echoes_skipped(applier_.echoes_skipped());
  stats_.set_pending(static_cast<std::int64_t>(outbox_.bytes()),
                     static_cast<std::int64_t>(outbox_.records()));
}

// After a (re)connection: the JetStream context, the stream, a fresh
// subscription after the last applied record.
bool Replicator::set_up() {
  need_setup_.store(false);
  if (nats_->js == nullptr) {
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = kJsApiWaitMs;
    jo.PublishAsync.MaxPending = kMaxAsyncPending;
    jo.PublishAsync.AckHandler = ack_bridge;
    jo.PublishAsync.AckHandlerClosure = this;
    if (const natsStatus s = natsConnection_JetStream(&nats_->js, nats_->conn, &jo); s != NATS_OK) {
      base::log(LogLevel::warn, "replication: no JetStream context", {{"error", status_text(s)}});
      need_setup_.store(true);
      return false;
    }
  }
  if (!jetstream_enabled()) {
    need_setup_.store(true);
    return false;
  }
  if (!ensure_stream() || !subscribe()) {
    note_problem(kNotSetUp);
    need_setup_.store(true);
    return false;
  }
  // The durable side (policy, snapshots): without it the changes still flow.
  if (std::string error; !StateStore(nats_->js, options_.stream).ensure(&error)) {
    base::log(LogLevel::warn, "replication: state stream not available", {{"error", error}});
  }
  return true;
}

// One JetStream API request: a server without JetStream says so (no responders, or the
// "JetStream not enabled" error); that is named in /readyz and logged with backoff. Any other
// answer is left to ensure_stream().
bool Replicator::jetstream_enabled() {
  jsAccountInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetAccountInfo(&info, nats_->js, nullptr, &code);
  jsAccountInfo_Destroy(info);
  if (!jetstream_off(s, code)) return true;
  note_problem(kNoJetStream);
  return false;
}

// Replication thread: the set-up problem /readyz names ("" = none).
void Replicator::clear_problem() {
  std::lock_guard lock(problem_mutex_);
  problem_.clear();
}

// Replication thread: names `problem` in /readyz and logs it, a new problem at once, the same
// one again only with backoff (LogBackoff); the line counts the attempts since the last one.
void Replicator::note_problem(const std::string& problem) {
  {
    std::lock_guard lock(problem_mutex_);
    problem_ = problem;
  }
  if (problem != logged_problem_) {
    problem_log_.restart();
    logged_problem_ = problem;
  }
  std::uint64_t suppressed = 0;
  std::int64_t next_in_us = 0;
  if (!problem_log_.allow(base::log_clock_us(), &suppressed, &next_in_us)) return;
  base::log(LogLevel::warn, "replication: " + problem + "; retrying with backoff",
            {{"url", options_.url},
             {"attempts", suppressed + 1},
             {"next_line_in_s", next_in_us / 1'000'000}});
}

bool Replicator::ensure_stream() {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, nats_->js, options_.stream.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = options_.stream.c_str();
    const char* subjects[] = {subject_.c_str()};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.MaxAge = options_.max_age_us * 1000;
    cfg.Duplicates = kDuplicateWindowNs;
    s = js_AddStream(&info, nats_->js, &cfg, nullptr, &code);
    if (s == NATS_OK) {
      base::log(LogLevel::info, "replication: stream created",
                {{"stream", options_.stream}, {"subject", subject_}});
    }
  }
  if (s != NATS_OK) {
    std::uint64_t suppressed = 0;
    if (stream_log_.allow(base::log_clock_us(), &suppressed)) {
      base::log(LogLevel::warn, "replication: stream not available",
                {{"stream", options_.stream},
                 {"error", status_text(s)},
                 {"code", int{code}},
                 {"suppressed", suppressed}});
    }
    return false;
  }
  check_identity(info->Created, info->State.FirstSeq);
  set_catch_up_target(info->State.LastSeq, info->State.Msgs);
  // A stream that restarted empty (its storage was lost) numbers from 1
  // again: resume at its first record rather than wait for our old sequence.
  const std::uint64_t last = info->State.LastSeq;
  if (applier_.next_sequence() > last + 1) {
    base::log(LogLevel::warn, "replication: stream is behind this server's position; resuming",
              {{"stream", options_.stream},
               {"applied_through", applier_.next_sequence() - 1},
               {"stream_last", last}});
    applier_.skip(info->State.FirstSeq > 0 ? info->State.FirstSeq - 1 : 0);
  }
  const std::uint64_t first = info->State.FirstSeq;
  if (applier_.next_sequence() > 1 && applier_.next_sequence() < first) {
    base::log(LogLevel::warn,
              "replication: records aged out of the stream before this server "
              "read them; their changes are missing until re-reported",
              {{"stream", options_.stream},
               {"from_sequence", applier_.next_sequence()},
               {"stream_first", first}});
  }
  jsStreamInfo_Destroy(info);
  return true;
}

// docs/replication.md "A deleted or re-created stream": the stream's creation
// time is its identity. Another one than the position's means the stream was
// deleted (and created again, by us or an operator) or its storage lost: the
// position means nothing in it, so the new stream is applied from its first
// record, never resumed at the old sequence (which would skip its start).
void Replicator::check_identity(std::int64_t created_ns, std::uint64_t first_sequence) {
  const std::int64_t known = stream_created_ns_.load();
  if (known == created_ns) return;
  if (known != 0) {
    stats_.add_stream_reset();
    base::log(LogLevel::warn,
              "replication: the stream was deleted or re-created; applying the new one from its "
              "first record",
              {{"stream", options_.stream},
               {"applied_through", applier_.next_sequence() - 1},
               {"old_created_ns", known},
               {"created_ns", created_ns},
               {"from_sequence", first_sequence > 0 ? first_sequence : 1}});
    applier_.skip(first_sequence > 0 ? first_sequence - 1 : 0);
    if (!caught_up_) target_known_ = false;  // wait for the new stream's last record instead
  }
  stream_created_ns_.store(created_ns);
}

// Once a second: is the stream still the one subscribed? A deleted stream
// leaves the connection up and the subscription silent; a re-created one
// numbers from 1 again. Either way set_up() runs again (it creates a missing
// stream and applies a new one from its start).
void Replicator::check_stream() {
  const auto now = std::chrono::steady_clock::now();
  if (now - stream_checked_at_ < kStreamCheckInterval) return;
  stream_checked_at_ = now;
  jsStreamInfo* info = nullptr;
  const natsStatus s =
      js_GetStreamInfo(&info, nats_->js, options_.stream.c_str(), nullptr, nullptr);
  if (s == NATS_NOT_FOUND) {
    if (!stream_missing_logged_) {
      stream_missing_logged_ = true;
      base::log(LogLevel::warn, "replication: the stream is gone (deleted?); creating it again",
                {{"stream", options_.stream}});
    }
    need_setup_.store(true);
  } else if (s == NATS_OK) {
    stream_missing_logged_ = false;
    if (info->Created != stream_created_ns_.load()) need_setup_.store(true);
  }
  jsStreamInfo_Destroy(info);
}

// The first contact fixes what /readyz waits for: the stream's last record
// then. An empty stream (or one whose records all aged out) has nothing to
// wait for.
void Replicator::set_catch_up_target(std::uint64_t last_sequence, std::uint64_t messages) {
  if (target_known_) return;
  target_known_ = true;
  target_ = messages == 0 ? 0 : last_sequence;
  stats_.set_catch_up_target(target_);
  base::log(LogLevel::info, "replication: catching up",
            {{"stream", options_.stream},
             {"target", target_},
             {"from_sequence", applier_.next_sequence()}});
}

void Replicator::check_caught_up() {
  if (caught_up_) return;
  const std::uint64_t through = applier_.applied_through();
  const bool reached = target_known_ && through >= target_;
  const bool gave_up = !target_known_ && std::chrono::steady_clock::now() - started_at_ >=
                                             std::chrono::microseconds(options_.startup_wait_us);
  if (!reached && !gave_up) return;
  caught_up_ = true;
  // The gauge shows at least what readiness was decided on.
  stats_.set_applied_sequence(through);
  stats_.set_caught_up();
  if (reached) {
    base::log(LogLevel::info, "replication: caught up",
              {{"stream", options_.stream}, {"applied_through", through}});
  } else {
    base::log(LogLevel::warn, "replication: stream not reached; ready from local state",
              {{"stream", options_.stream}, {"waited_ms", options_.startup_wait_us / 1000}});
  }
  if (options_.on_caught_up) options_.on_caught_up();
}

bool Replicator::subscribe() {
  natsSubscription_Destroy(nats_->sub);
  nats_->sub = nullptr;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = options_.stream.c_str();
  // A pull consumer: the server sends what a fetch asks for and no more, so a
  // burst or a catch-up waits in the stream, not in this process. No acks:
  // a delivery lost on the way shows as a jump of the consumer sequence
  // (in_order), and the subscription starts again after the last record taken.
  so.Config.AckPolicy = js_AckNone;
  so.Config.InactiveThreshold = kConsumerInactiveNs;
  const std::uint64_t next = applier_.next_sequence();
  so.Config.DeliverPolicy = next > 1 ? js_DeliverByStartSequence : js_DeliverAll;
  so.Config.OptStartSeq = next > 1 ? next : 0;
  jsErrCode code = static_cast<jsErrCode>(0);
  resubscribe_at_ = {};
  consumer_sequence_ = 0;
  const natsStatus s =
      js_PullSubscribe(&nats_->sub, nats_->js, subject_.c_str(), nullptr, nullptr, &so, &code);
  if (s != NATS_OK) {
    base::log(LogLevel::warn, "replication: subscription failed",
              {{"stream", options_.stream}, {"error", status_text(s)}, {"code", int{code}}});
    return false;
  }
  stats_.add_reconnect();
  base::log(LogLevel::info, "replication: subscribed",
            {{"stream", options_.stream}, {"from_sequence", next}});
  return true;
}

// The round's records in batches of consecutive origin sequences (one
// JetStream message each: the per-message cost of publishing, acknowledging
// and receiving is paid once per batch, not per change).
void Replicator::publish_some() {
  std::vector<Outbox::Item> items = outbox_.take(kPublishBatch);
  for (std::size_t i = 0, j = 0; i < items.size(); i = j) {
    std::string body = batch_header();
    for (j = i; j < items.size() && j - i < kBatchRecords; ++j) {
      if (j > i && (items[j].sequence != items[j - 1].sequence + 1 ||
                    body.size() + items[j].body.size() > kBatchBytes)) {
        break;
      }
      append_to_batch(&body, items[j].body);
    }
    if (!publish_batch(items[i].sequence, items[j - 1].sequence, body)) {
      stats_.add_publish_failure();
      requeued_through_.store(std::max(requeued_through_.load(), items[j - 1].sequence));
      for (std::size_t k = i; k < j; ++k) {
        outbox_.failed(Outbox::Item{items[k].sequence, std::move(items[k].body)});
      }
    }
  }
}

bool Replicator::publish_batch(std::uint64_t first, std::uint64_t last, const std::string& body) {
  natsMsg* msg = nullptr;
  natsStatus s =
      natsMsg_Create(&msg, subject_.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) {
    s = natsMsgHeader_Set(msg, kMsgIdHeader,
                          batch_id(encoder_.origin(), first, last, id_epoch_.load()).c_str());
  }
  if (s == NATS_OK) {
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = kAckWaitMs;  // a lost ack comes back as a failure: republished
    s = js_PublishMsgAsync(nats_->js, &msg, &po);
  }
  natsMsg_Destroy(msg);  // null once the library took it
  return s == NATS_OK;
}

// One round: a fetch of messages, each message's records posted to the cores
// (one task per core) as soon as it is parsed; after a burst, its memory
// handed back.
void Replicator::receive_some() {
  const std::size_t posted = receive_round();
  const auto now = std::chrono::steady_clock::now();
  if (posted > 0) {
    applied_since_collect_ += posted;
    last_received_at_ = now;
  } else if (applied_since_collect_ >= kCollectAfterRecords &&
             now - last_received_at_ >= kCollectWhenQuiet && applier_.idle()) {
    // The burst is over and every record of it ran (freed on its core).
    mi_collect(true);
    applier_.collect_on_cores();
    applied_since_collect_ = 0;
  }
}

// Posts the records apply_message() queued; how many. Flushes with nothing
// queued too: a message that gives the cores nothing (an echo, a templates
// document, which applies off the cores) still moves applied-through.
std::size_t Replicator::post_queued() {
  const std::size_t queued = applier_.queued();
  if (!applier_.flush(stopping_)) return 0;
  stats_.add_applied(queued);
  return queued;
}

// The message follows the last one taken from this consumer. With no acks a
// delivery that never reached the subscription is not sent again: past a
// jump the subscription starts again after the last record taken (as the
// library's ordered push consumer does).
bool Replicator::in_order(const jsMsgMetaData& meta) {
  const std::uint64_t got = meta.Sequence.Consumer;
  if (consumer_sequence_ != 0 && got != consumer_sequence_ + 1) {
    base::log(LogLevel::warn, "replication: deliveries lost; resubscribing",
              {{"stream", options_.stream},
               {"expected", consumer_sequence_ + 1},
               {"got", got},
               {"from_sequence", applier_.next_sequence()}});
    need_setup_.store(true);
    return false;
  }
  consumer_sequence_ = got;
  return true;
}

// One fetch: at most the connection's max payload plus kFetchHeaderBytes of
// messages (kRoundBytes at least), waiting kIdleWaitMs when nothing is there.
// A message that arrives after its fetch returned stays in the subscription
// and is taken by the next fetch. Each message's records go to the cores
// before the next message is parsed, so at most one message's records wait
// parsed beside the kMaxInFlight posted. Returns the records posted.
std::size_t Replicator::receive_round() {
  if (resubscribe_at_ != std::chrono::steady_clock::time_point{}) {
    if (std::chrono::steady_clock::now() < resubscribe_at_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kIdleWaitMs));
      return 0;
    }
    resubscribe_at_ = {};
    need_setup_.store(true);
    return 0;
  }
  jsFetchRequest request;
  jsFetchRequest_Init(&request);
  request.Batch = kReceiveBatch;
  request.MaxBytes = std::max<std::int64_t>(
      kRoundBytes, natsConnection_GetMaxPayload(nats_->conn) + kFetchHeaderBytes);
  request.Expires = kIdleWaitMs * 1'000'000;
  natsMsgList list{};
  const natsStatus s = natsSubscription_FetchRequest(&list, nats_->sub, &request);
  if (s != NATS_OK && s != NATS_TIMEOUT) {
    // Not at once: a deleted stream's consumer goes first, and a stream
    // created again while the old one's files are still being removed is
    // broken (nats-server 2.9: "error opening msg block file"); the stream
    // check (kStreamCheckInterval) runs meanwhile.
    base::log(LogLevel::warn, "replication: subscription lost; resubscribing",
              {{"error", status_text(s)}});
    resubscribe_at_ = std::chrono::steady_clock::now() + kStreamCheckInterval;
  }
  std::size_t posted = 0;
  for (int i = 0; i < list.Count && !stopping_.load(std::memory_order_relaxed); ++i) {
    natsMsg* msg = list.Msgs[i];
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
      if (!in_order(*meta)) {
        jsMsgMetaData_Destroy(meta);
        break;
      }
      const std::uint64_t sequence = meta->Sequence.Stream;
      stats_.set_lag(meta->NumPending);
      // Nothing after it: records up to the target were deleted meanwhile
      // (age, limits), so this one is the last there is to wait for.
      if (!caught_up_ && meta->NumPending == 0 && sequence < target_) {
        target_ = sequence;
        stats_.set_catch_up_target(target_);
      }
      if (sequence >= applier_.next_sequence()) apply_message(sequence, msg);
      jsMsgMetaData_Destroy(meta);
    }
    posted += post_queued();
  }
  natsMsgList_Destroy(&list);
  return posted;
}

// One stream message: a batch of records (or a single one of format 1).
void Replicator::apply_message(std::uint64_t sequence, natsMsg* msg) {
  const std::string_view body(natsMsg_GetData(msg),
                              static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  std::uint64_t skipped = 0;
  if (!decode_received(body, encoder_.origin(), &received_, &skipped)) skipped = 1;
  stats_.add_skipped(skipped);
  if (received_.empty()) {
    applier_.skip(sequence);
    return;
  }
  for (Received& received : received_) {
    if (auto* own = std::get_if<OwnChange>(&received)) {
      applier_.add(sequence, std::move(*own));
      continue;
    }
    auto& record = std::get<state_pb::ReplicationRecord>(received);
    if (record.has_policy_json()) {
      keep_document(KeptDocument::kPolicy, sequence, record, record.policy_json());
    }
    if (record.has_templates_json()) {
      keep_document(KeptDocument::kTemplates, sequence, record, record.templates_json());
    }
    // This process's own documents are in force already (an echo could only
    // bring back an older one for a moment).
    if (record.has_templates_json() && options_.on_templates &&
        record.origin() != encoder_.origin()) {
      options_.on_templates(sequence, record.templates_json());
    }
    applier_.add(sequence, std::move(record));
  }
}

// docs/replication.md "Policy and templates": every server that applies a
// policy or template record offers it to the state stream; the first write
// wins, the others find it kept already (one read each).
void Replicator::keep_document(KeptDocument kind, std::uint64_t sequence,
                               const state_pb::ReplicationRecord& record, const std::string& json) {
  state_pb::DurableDocument document;
  document.set_stream_sequence(sequence);
  document.set_json(json);
  document.set_origin(record.origin());
  document.set_accepted_at_us(record.accepted_at_us());
  if (std::string error; !StateStore(nats_->js, options_.stream).keep(kind, document, &error)) {
    base::log(
        LogLevel::warn,
        std::string("replication: ") + kept_document_name(kind) + " not kept in the state stream",
        {{"stream_sequence", sequence}, {"error", error}});
  }
}

// Due when the interval passed since this server's last one and the group's
// latest is not newer than half an interval (another server publishes).
bool Replicator::snapshot_due(StateStore& store, std::int64_t now_us, std::uint64_t sequence) {
  const std::int64_t interval = options_.snapshot_interval_us;
  if (interval <= 0 || !connected_.load() || now_us - last_snapshot_us_ < interval) return false;
  std::string error;
  const std::optional<state_pb::SnapshotManifest> latest = store.manifest(&error);
  if (!error.empty()) return false;
  if (latest &&
      (latest->stream_sequence() >= sequence || now_us - latest->created_at_us() < interval / 2)) {
    return false;
  }
  return true;
}

void Replicator::publish_snapshot(const std::string& state_file) {
  jsCtx* js = nullptr;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = kJsApiWaitMs;
  if (nats_ == nullptr || natsConnection_JetStream(&js, nats_->conn, &jo) != NATS_OK) return;
  StateStore store(js, options_.stream);
  const std::int64_t now = router_.clock().wall_us();
  std::error_code ec;
  const auto size = std::filesystem::file_size(state_file, ec);
  const persist::StreamPosition at = position();
  if (ec || !snapshot_due(store, now, at.sequence)) {
    jsCtx_Destroy(js);
    return;
  }
  last_snapshot_us_ = now;
  std::string error;
  if (size > options_.snapshot_max_bytes) {
    error = "state file of " + std::to_string(size) + " bytes exceeds --nats-snapshot-max-bytes";
  } else {
    std::ifstream in(state_file, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const persist::StateFileContents parsed = persist::parse_state_bytes(bytes);
    if (parsed.status != persist::LoadStatus::kOk ||
        parsed.header.stream_name() != options_.stream) {
      error = "state file unreadable or of another stream";
    } else {
      const std::uint64_t sequence = parsed.header.stream_sequence();
      const std::string id = encoder_.origin() + "/" + std::to_string(now);
      if (store.publish_snapshot(split_snapshot(bytes, id, sequence, now), &error)) {
        stats_.add_snapshot_published(sequence);
        base::log(LogLevel::info, "replication: snapshot published",
                  {{"stream_sequence", sequence}, {"bytes", bytes.size()}});
      }
    }
  }
  if (!error.empty()) {
    stats_.add_snapshot_failure();
    base::log(LogLevel::warn, "replication: snapshot not published", {{"error", error}});
  }
  jsCtx_Destroy(js);
}

}  // namespace ic::replication
