// A KV-event publisher that behaves like vLLM's ZmqEventPublisher, for the tests, the benchmark
// and manual runs: multipart [topic, seq (8 bytes big-endian), payload] on a PUB-compatible socket
// (XPUB, so a test can wait for the subscriber), and a ROUTER replay socket that answers
// ["", start_seq] with ["", (topic,) seq, payload] per buffered batch from start_seq on and ends
// with ["", (topic,) 0xFF×8, ""].
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ic::tools::kvevents {

struct PublisherOptions {
  std::string endpoint = "tcp://127.0.0.1:*";  // bind address of the live socket
  std::string replay_endpoint;                 // bind address of the ROUTER; empty = none
  std::string topic = "kv-events";
  bool topic_in_replay = true;       // vLLM ≥ 0.26 reply shape; false = [seq, payload]
  std::size_t buffer_steps = 10000;  // batches kept for replay (vLLM's default)
};

class TestPublisher {
 public:
  // Binds both sockets; throws std::runtime_error when it cannot.
  explicit TestPublisher(PublisherOptions options);
  ~TestPublisher();
  TestPublisher(const TestPublisher&) = delete;
  TestPublisher& operator=(const TestPublisher&) = delete;

  // The bound endpoints ("tcp://127.0.0.1:<port>").
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }

  // Waits until a subscriber's subscription arrived (ZeroMQ drops what PUB sends before).
  bool wait_for_subscriber(std::chrono::milliseconds timeout);
  // Publishes `payload` as the next seq and keeps it for replay; returns the seq.
  std::uint64_t publish(const std::string& payload);
  // Keeps `payload` for replay under the next seq without sending it live (a lost message).
  std::uint64_t publish_lost(const std::string& payload);
  // Sends arbitrary frames live (malformed-frame tests); no seq is used.
  void send_frames(const std::vector<std::string>& frames);
  // A new publisher process: seq starts at 0 again and the replay buffer is empty.
  void restart();
  // Replay requests answered so far.
  int replays_served() const { return replays_served_.load(); }

 private:
  void serve_replay();
  std::uint64_t keep(const std::string& payload);

  PublisherOptions options_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;
  std::string endpoint_;
  std::string replay_endpoint_;
  std::mutex mutex_;  // buffer_ and next_seq_ (the replay thread reads them)
  std::deque<std::pair<std::uint64_t, std::string>> buffer_;
  std::uint64_t next_seq_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> replays_served_{0};
  std::thread replay_thread_;
};

// "tcp://127.0.0.1:5557" → 5557; 0 when the endpoint has no port.
int endpoint_port(const std::string& endpoint);

}  // namespace ic::tools::kvevents
