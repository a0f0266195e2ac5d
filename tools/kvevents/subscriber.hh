// The ZeroMQ side (docs/kvevents.md "What it accepts on the wire", "Sequence gaps, replay and
// resync", "Running it"): one SUB socket per DP rank (rank r on the engine endpoint's port + r)
// and, with --replay-endpoint, one DEALER per rank for replays. Runs on its own thread; owns the
// Pipeline, so every state change happens here.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kvevents/config.hh"
#include "kvevents/counters.hh"
#include "kvevents/pipeline.hh"
#include "kvevents/sender.hh"

namespace ic::tools::kvevents {

class Subscriber {
 public:
  // Connects every socket (ZeroMQ connects lazily: the engine may start later).
  Subscriber(const AdapterConfig& config, Counters& counters, Sender& sender);
  ~Subscriber();

  // Polls until `stop` is set, then flushes pending adds into the sender.
  void run(const std::atomic<bool>& stop);
  // Steady-clock µs of the last loop turn (for /healthz).
  std::int64_t heartbeat_us() const { return heartbeat_us_.load(); }

 private:
  class Link;
  std::vector<std::string> replica_names() const;

  const AdapterConfig& config_;
  Counters& counters_;
  Sender& sender_;
  Pipeline pipeline_;
  struct Zmq;
  std::unique_ptr<Zmq> zmq_;
  std::vector<std::unique_ptr<Link>> links_;
  std::atomic<std::int64_t> heartbeat_us_{0};
};

}  // namespace ic::tools::kvevents
