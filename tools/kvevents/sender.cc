#include "kvevents/sender.hh"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "base/log.hh"
#include "bench/h2_connection.hh"
#include "common/cli_parse.hh"
#include "common/grpc_frame.hh"

namespace ic::tools::kvevents {

namespace v1 = inferencecache::v1alpha1;
using base::LogLevel;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr const char* kReportPath = "/inferencecache.v1alpha1.InferenceCache/ReportCacheState";
constexpr const char* kPublishPath = "/inferencecache.v1alpha1.InferenceCache/PublishEvent";
// Outcome tag of the ReportCacheState call; an event's tag is its CacheEvent type (never 0).
constexpr std::uint64_t kStreamTag = 0;
// Update bytes the stream may hold before the socket takes them (HTTP/2 flow control or a full
// socket): beyond it updates wait in the queue, which then applies backpressure.
constexpr std::size_t kMaxUnsentBytes = 1 << 20;
// At most one "cannot reach" line per this (µs) while the server stays away; the attempts in
// between are counted into the next line.
constexpr std::int64_t kUnreachableLogUs = 30'000'000;

// A server that vanished without a FIN (host loss) is noticed by TCP keepalive when idle and by
// the user timeout when data is unacknowledged.
void set_keepalive(int fd) {
  const int on = 1, idle_s = 20, interval_s = 5, probes = 2, user_timeout_ms = 30000;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

}  // namespace

Sender::Sender(SenderOptions options, Counters& counters)
    : options_(std::move(options)),
      counters_(counters),
      unreachable_log_(kUnreachableLogUs),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!split_host_port(options_.server, &host_, &port_)) {
    throw std::invalid_argument("server address is not host:port: " + options_.server);
  }
}

Sender::~Sender() {
  stop(0);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Sender::start() {
  thread_ = std::thread([this] { run(); });
}

void Sender::stop(int grace_ms) {
  if (!thread_.joinable()) return;
  stop_deadline_ = SteadyClock::now() + std::chrono::milliseconds(grace_ms);
  stopping_ = true;
  not_full_.notify_all();
  wake();
  thread_.join();
}

void Sender::push(Outbound message, std::size_t entries) {
  entries = entries == 0 ? 1 : entries;
  {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] {
      return !connected_ || stopping_ || queue_.empty() ||
             queued_entries_ + entries <= options_.max_queued_entries;
    });
    if (!connected_ || stopping_) {
      counters_.add(Metric::superseded_entries, entries);
      return;
    }
    queue_.push_back(Item{std::move(message), entries});
    queued_entries_ += entries;
    counters_.set(Metric::queue_depth, queued_entries_);
  }
  // A syscall only when the sender thread is asleep on an empty queue.
  if (sleeping_.exchange(false)) wake();
}

void Sender::run() {
  int backoff = options_.backoff_initial_ms;
  for (;;) {
    if (stopping_ && stop_finished()) break;
    if (!conn_) {
      if (stopping_) break;
      if (!connect()) {
        if (!sleep_backoff(backoff)) break;
        backoff = std::min(backoff * 2, options_.backoff_max_ms);
        continue;
      }
      backoff = options_.backoff_initial_ms;
    }
    hand_over();
    if (stopping_ && !writes_ended_ && events_in_flight_ == 0) {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) {
        conn_->end_writes(stream_id_);
        writes_ended_ = true;
      }
    }
    if (failure_.empty() && !conn_->flush()) failure_ = "connection to the server lost";
    if (failure_.empty()) wait_io(100);
    if (failure_.empty() && events_in_flight_ > 0 &&
        SteadyClock::now() - last_answer_ > std::chrono::milliseconds(options_.rpc_timeout_ms)) {
      failure_ = "PublishEvent unanswered for " + std::to_string(options_.rpc_timeout_ms) + " ms";
    }
    if (!failure_.empty()) {
      fail(failure_);
      // A server that takes connections but fails every call must not get a reconnect storm.
      if (!sleep_backoff(backoff)) break;
      backoff = std::min(backoff * 2, options_.backoff_max_ms);
    }
  }
  discard_queue();
  disconnect();
}

bool Sender::connect() {
  try {
    conn_ = std::make_unique<bench::H2Connection>(
        host_, port_, 1000, [this](bench::CallOutcome&& outcome) { on_done(std::move(outcome)); });
  } catch (const std::runtime_error& e) {
    std::uint64_t suppressed = 0;
    if (unreachable_log_.allow(base::log_clock_us(), &suppressed)) {
      base::log(LogLevel::warn, "cannot reach the InferenceCache server; retrying with backoff",
                {{"server", options_.server}, {"why", e.what()}, {"suppressed", suppressed}});
    }
    return false;
  }
  set_keepalive(conn_->fd());
  conn_->set_user_agent("inferencecache-kvevents");
  failure_.clear();
  writes_ended_ = false;
  events_in_flight_ = 0;
  stream_id_ = conn_->open_stream(kReportPath, kStreamTag);
  if (stream_id_ < 0 || !conn_->flush()) {
    disconnect();
    return false;
  }
  counters_.add(Metric::reconnects);
  counters_.set(Metric::stream_connected, 1);
  {
    std::lock_guard lock(mutex_);
    connected_ = true;
  }
  snapshot_requested_ = true;
  base::log(LogLevel::info, "connected to the InferenceCache server",
            {{"server", options_.server}});
  return true;
}

bool Sender::front_ready() const {
  if (std::holds_alternative<v1::CacheStateUpdate>(queue_.front().message)) {
    // A PublishEvent in flight may not have been applied yet, and the stream's message could
    // overtake it (an ALL_CLEARED landing after the adds that follow it would wipe them): let
    // every earlier event be answered first.
    return events_in_flight_ == 0 && conn_->unsent(stream_id_) < kMaxUnsentBytes;
  }
  // An event after an update: the update's bytes must be on their way before the event's, or
  // the eviction of a prefix could reach the server before its add. Events among themselves
  // stay pipelined, up to what the server allows (one stream is the ReportCacheState call).
  const auto peer = static_cast<int>(std::min<std::uint32_t>(conn_->peer_max_streams(), INT_MAX));
  const int cap = std::max(1, std::min(options_.max_events_in_flight, peer - 1));
  return conn_->unsent(stream_id_) == 0 && events_in_flight_ < cap;
}

void Sender::hand_over() {
  while (failure_.empty() && !writes_ended_) {
    Item item;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty() || !front_ready()) break;
      item = std::move(queue_.front());
      queue_.pop_front();
      queued_entries_ -= item.entries;
      counters_.set(Metric::queue_depth, queued_entries_);
    }
    not_full_.notify_all();
    send(item.message);
  }
}

void Sender::send(const Outbound& message) {
  if (const auto* update = std::get_if<v1::CacheStateUpdate>(&message)) {
    std::string framed;
    append_grpc_frame(*update, &framed);
    conn_->write(stream_id_, framed);
    // Hand the update to the socket now: the events behind it wait until it left.
    if (!conn_->flush()) failure_ = "connection to the server lost";
    counters_.add(Metric::updates_sent);
    counters_.add(Metric::prefix_entries_sent, static_cast<std::uint64_t>(update->prefixes_size()));
    if (update->has_stats()) counters_.add(Metric::stats_sent);
    return;
  }
  const auto& event = std::get<v1::CacheEvent>(message);
  auto body = std::make_shared<std::string>();
  append_grpc_frame(event, body.get());
  if (events_in_flight_++ == 0) last_answer_ = SteadyClock::now();
  conn_->start(kPublishPath, std::move(body), 0, static_cast<std::uint64_t>(event.type()));
}

void Sender::on_done(bench::CallOutcome&& outcome) {
  if (outcome.tag == kStreamTag) {
    stream_id_ = -1;
    if (!writes_ended_) {
      if (failure_.empty()) failure_ = "ReportCacheState ended: " + outcome.status;
    } else if (outcome.status != "OK") {
      base::log(LogLevel::warn, "ReportCacheState ended with an error",
                {{"status", outcome.status}});
    }
    return;
  }
  --events_in_flight_;
  last_answer_ = SteadyClock::now();
  if (outcome.status == "OK") {
    counters_.add(outcome.tag == v1::CacheEvent::ALL_CLEARED ? Metric::all_cleared_sent
                                                             : Metric::evictions_sent);
  } else if (failure_.empty()) {
    failure_ = "PublishEvent failed: " + outcome.status;
  }
}

void Sender::wait_io(int timeout_ms) {
  pollfd fds[2] = {
      {conn_->fd(), static_cast<short>(POLLIN | (conn_->wants_write() ? POLLOUT : 0)), 0},
      {wake_fd_, POLLIN, 0}};
  {
    // Sleep through pushes only while nothing is queued; otherwise the queue waits on the
    // connection (answers, a writable socket), which the poll watches anyway. Messages pushed
    // since hand_over() that may go now: only look at the socket, do not wait.
    std::lock_guard lock(mutex_);
    sleeping_ = queue_.empty() && !stopping_;
    if (!queue_.empty() && !writes_ended_ && front_ready()) timeout_ms = 0;
  }
  poll(fds, 2, timeout_ms);
  sleeping_ = false;
  if (fds[1].revents != 0) {
    std::uint64_t n = 0;
    [[maybe_unused]] const auto r = ::read(wake_fd_, &n, sizeof n);
  }
  if (fds[0].revents != 0 && !conn_->pump() && failure_.empty()) {
    failure_ = "connection to the server lost";
  }
}

bool Sender::stop_finished() {
  if (!conn_ || (writes_ended_ && stream_id_ < 0)) return true;
  if (SteadyClock::now() < stop_deadline_) return false;
  base::log(LogLevel::warn, "shutdown grace over before the server took everything",
            {{"events_in_flight", std::to_string(events_in_flight_)}});
  return true;
}

void Sender::fail(const std::string& why) {
  counters_.add(Metric::send_errors);
  disconnect();
  discard_queue();
  base::log(LogLevel::warn, "lost the InferenceCache server; reconnecting",
            {{"server", options_.server}, {"why", why}});
  failure_.clear();
}

void Sender::disconnect() {
  {
    std::lock_guard lock(mutex_);
    connected_ = false;
  }
  not_full_.notify_all();
  // The destructor frees the open calls without completing them: they are superseded by the
  // snapshot that follows the reconnect.
  conn_.reset();
  stream_id_ = -1;
  events_in_flight_ = 0;
  counters_.set(Metric::stream_connected, 0);
}

void Sender::discard_queue() {
  {
    std::lock_guard lock(mutex_);
    counters_.add(Metric::superseded_entries, queued_entries_);
    queue_.clear();
    queued_entries_ = 0;
    counters_.set(Metric::queue_depth, 0);
  }
  not_full_.notify_all();
}

bool Sender::sleep_backoff(int ms) {
  std::unique_lock lock(mutex_);
  not_full_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_.load(); });
  return !stopping_;
}

void Sender::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto r = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace ic::tools::kvevents
