// The server side (docs/kvevents.md "Delivery"): one HTTP/2 connection to the server (nghttp2,
// the bench's client connection) carrying one long-lived ReportCacheState stream for updates and
// pipelined PublishEvent calls for events, fed from a bounded queue in push order. An update is
// written only once every earlier event has been answered, and an event starts only once every
// earlier update has left for the socket, so the server applies them in order. On any failure
// the connection is closed, the queue is discarded (counted as superseded) and the sender
// reconnects with exponential backoff; once connected again it asks the subscriber for a
// snapshot, which re-sends the whole state, so nothing is lost silently and memory stays bounded.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/log.hh"
#include "kvevents/counters.hh"
#include "kvevents/outbox.hh"
#include "kvevents/sender_options.hh"

namespace ic::tools::bench {
class H2Connection;
struct CallOutcome;
}  // namespace ic::tools::bench

namespace ic::tools::kvevents {

class Sender final : public Outbox {
 public:
  // `options.server` must be host:port (the flag parser checked it).
  Sender(SenderOptions options, Counters& counters);
  ~Sender() override;
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Starts the sender thread (connects in the background).
  void start();
  // Sends what is queued for at most `grace_ms`, ends the stream and joins the thread. What is
  // still queued after the grace is counted as superseded.
  void stop(int grace_ms);

  // While connected: waits for room, then queues. While disconnected: discards (superseded by
  // the snapshot that follows the reconnect).
  void push(Outbound message, std::size_t entries) override;

  // True once after each (re)connection: the caller must push a snapshot of its whole state.
  bool take_snapshot_request() { return snapshot_requested_.exchange(false); }
  bool connected() const { return connected_.load(); }

 private:
  struct Item {
    Outbound message;
    std::size_t entries;
  };

  void run();
  bool connect();
  // Moves queued messages onto the connection, in order, as far as the ordering rules allow.
  void hand_over();
  // The front item if the ordering rules let it go now (the queue lock is held).
  bool front_ready() const;
  void send(const Outbound& message);
  void on_done(bench::CallOutcome&& outcome);
  // Waits up to `timeout_ms` for the socket or a push, then lets the connection read and write.
  void wait_io(int timeout_ms);
  // True when stop() asked for the end and the stream has ended or the grace ran out.
  bool stop_finished();
  void fail(const std::string& why);
  void disconnect();
  void discard_queue();
  bool sleep_backoff(int ms);
  void wake();

  SenderOptions options_;
  Counters& counters_;
  base::LogRateLimit unreachable_log_;  // "cannot reach the server" lines
  std::string host_;
  int port_ = 0;
  int wake_fd_ = -1;  // eventfd: push() and stop() wake the sender thread's poll

  // Sender thread only.
  std::unique_ptr<bench::H2Connection> conn_;
  std::int32_t stream_id_ = -1;  // the open ReportCacheState call
  bool writes_ended_ = false;    // END_STREAM sent on it (stopping)
  int events_in_flight_ = 0;
  std::chrono::steady_clock::time_point last_answer_;  // last event answered (or first started)
  std::string failure_;  // why the connection must go, set while pumping it

  std::mutex mutex_;
  std::condition_variable not_full_;
  std::deque<Item> queue_;
  std::size_t queued_entries_ = 0;

  std::atomic<bool> sleeping_{false};  // the sender thread polls with an empty queue
  std::atomic<bool> connected_{false};
  std::atomic<bool> snapshot_requested_{false};
  std::atomic<bool> stopping_{false};
  std::chrono::steady_clock::time_point stop_deadline_;  // written before stopping_ is set
  std::thread thread_;
};

}  // namespace ic::tools::kvevents
