// inferencecache-kvevents: subscribes to a vLLM / SGLang engine's ZeroMQ KV events and feeds the
// InferenceCache index (docs/kvevents.md). One per engine pod, as a sidecar.
#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>

#include "base/log.hh"
#include "common/interrupt.hh"
#include "kvevents/config.hh"
#include "kvevents/http_endpoint.hh"
#include "kvevents/scraper.hh"
#include "kvevents/sender.hh"
#include "kvevents/subscriber.hh"

namespace {

using namespace ic::tools::kvevents;
using ic::base::LogLevel;

// Grace for queued messages at shutdown (SIGTERM).
constexpr int kShutdownGraceMs = 5000;
// /healthz fails when the event loop has not turned for this long (µs).
constexpr std::int64_t kStallUs = 10'000'000;

std::int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> replicas_of(const AdapterConfig& c) {
  std::vector<std::string> names;
  for (int r = 0; r < c.dp_size; ++r) names.push_back(replica_name(c.replica_id, c.dp_size, r));
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  ConfigOutcome outcome = parse_config(argc, argv);
  if (!outcome.config) {
    (outcome.exit_code == 0 ? std::cout : std::cerr) << outcome.message << "\n";
    return outcome.exit_code;
  }
  const AdapterConfig& config = *outcome.config;
  ic::base::configure_logging(config.log_format, config.log_level);
  ic::tools::install_interrupt_handler();

  Counters counters;
  Sender sender(config.sender, counters);
  Subscriber subscriber(config, counters, sender);
  HttpEndpoint http(
      counters, [&] { return steady_us() - subscriber.heartbeat_us() < kStallUs; },
      [&] { return sender.connected(); });
  if (!config.http_bind_address.empty()) {
    std::string error;
    if (!http.start(config.http_bind_address, &error)) {
      std::cerr << "inferencecache-kvevents: " << error << "\n";
      return 2;
    }
  }
  Scraper scraper(config, replicas_of(config), counters, sender);
  sender.start();
  if (!config.engine_metrics_url.empty()) scraper.start();
  ic::base::log(LogLevel::info, "inferencecache-kvevents started",
                {{"engine_endpoint", config.engine_endpoint},
                 {"replay_endpoint", config.replay_endpoint},
                 {"server", config.sender.server},
                 {"replica_id", config.replica_id},
                 {"dp_size", std::to_string(config.dp_size)},
                 {"http_bind_address", config.http_bind_address}});

  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!ic::tools::interrupted()) ic::tools::sleep_unless_interrupted(200'000);
    stop = true;
  });
  subscriber.run(stop);
  watcher.join();
  scraper.stop();
  sender.stop(kShutdownGraceMs);
  http.stop();
  ic::base::log(LogLevel::info, "inferencecache-kvevents stopped");
  return 0;
}
