// The server side (docs/kvevents.md "Delivery"): one long-lived ReportCacheState stream for
// updates and pipelined PublishEvent calls for events, fed from a bounded queue in push order. An
// update waits until every earlier event has completed, so the server applies them in order.
// On any failure the stream is closed, the queue is discarded (counted as superseded) and the
// sender reconnects with exponential backoff; once connected again it asks the subscriber for a
// snapshot, which re-sends the whole state, so nothing is lost silently and memory stays bounded.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "kvevents/counters.hh"
#include "kvevents/outbox.hh"
#include "kvevents/sender_options.hh"

namespace ic::tools::kvevents {

class Sender final : public Outbox {
 public:
  Sender(SenderOptions options, Counters& counters);
  ~Sender() override;
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Starts the sender thread (connects in the background).
  void start();
  // Sends what is queued for at most `grace_ms`, half-closes the stream and joins the thread.
  void stop(int grace_ms);

  // While connected: waits for room, then queues. While disconnected: discards (superseded by
  // the snapshot that follows the reconnect).
  void push(Outbound message, std::size_t entries) override;

  // True once after each (re)connection: the caller must push a snapshot of its whole state.
  bool take_snapshot_request() { return snapshot_requested_.exchange(false); }
  bool connected() const { return connected_.load(); }

 private:
  using Stub = inferencecache::v1alpha1::InferenceCache::Stub;
  struct Item {
    Outbound message;
    std::size_t entries;
  };
  struct Stream;

  void run();
  bool connect();
  bool send(const Outbound& message);
  bool send_event(const inferencecache::v1alpha1::CacheEvent& event);
  void fail(const std::string& why);
  void close_stream(bool half_close);
  void wait_events_drained(int timeout_ms);
  bool sleep_backoff(int ms);

  SenderOptions options_;
  Counters& counters_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
  std::unique_ptr<Stream> stream_;

  std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<Item> queue_;
  std::size_t queued_entries_ = 0;

  std::mutex events_mutex_;
  std::condition_variable events_cv_;
  int events_in_flight_ = 0;
  std::atomic<bool> event_failed_{false};

  std::atomic<bool> connected_{false};
  std::atomic<bool> snapshot_requested_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  std::thread thread_;
};

}  // namespace ic::tools::kvevents
