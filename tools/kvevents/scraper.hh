// The stats path (docs/kvevents.md "Stats"): every --stats-interval, GET the engine's /metrics,
// compute ReplicaStats and queue one stats-only CacheStateUpdate per replica (with --dp-size > 1,
// each rank from its own series). Runs on its own
// thread; a failed scrape sends nothing, and 3 in a row log `load_signal_stale`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvevents/config.hh"
#include "kvevents/counters.hh"
#include "kvevents/engine_stats.hh"
#include "kvevents/outbox.hh"

namespace ic::tools::kvevents {

// "http://host:port/path" split for the HTTP client; nullopt when it is not such a URL.
struct HttpUrl {
  std::string scheme_host_port;  // "http://host:port"
  std::string path;              // "/metrics"
};
std::optional<HttpUrl> parse_http_url(const std::string& url);

// The stats-only update for `replica` (no prefixes), as the server expects it.
inferencecache::v1alpha1::CacheStateUpdate stats_update(const Identity& identity,
                                                        const std::string& replica,
                                                        const EngineStats& stats);

class Scraper {
 public:
  Scraper(const AdapterConfig& config, std::vector<std::string> replicas, Counters& counters,
          Outbox& outbox);
  ~Scraper();
  void start();
  void stop();

 private:
  void run();
  void tick();

  const AdapterConfig& config_;
  std::vector<std::string> replicas_;
  Counters& counters_;
  Outbox& outbox_;
  std::vector<StatsComputer> computers_;  // one per replica: its rank's series, its counters
  int failures_in_a_row_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ic::tools::kvevents
