// inferencecache-kvevents flags (docs/kvevents.md "Flags"). The names of the earlier sidecar are
// kept so existing pod specs work; the rest are ours. Durations use Go syntax ("100ms", "10s").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/log.hh"
#include "kvevents/engine_stats.hh"
#include "kvevents/pipeline.hh"
#include "kvevents/replica_state.hh"
#include "kvevents/sender_options.hh"

namespace ic::tools::kvevents {

struct AdapterConfig {
  std::string engine_endpoint = "tcp://127.0.0.1:5557";  // PUB endpoint of DP rank 0
  std::string replay_endpoint;                           // ROUTER of rank 0; empty = no replay
  std::string topic = "kv-events";                       // subscription prefix; empty = all
  int dp_size = 1;                                       // rank r is on the ports + r
  std::string replica_id;                                // required
  Identity identity;                                     // model (required), tenant, scheme
  std::int64_t window_us = 100'000;
  std::int64_t refresh_us = 600'000'000;  // --refresh-interval: re-report every block (0 = never)
  std::string engine_metrics_url = "http://127.0.0.1:8000/metrics";  // empty = no stats
  std::int64_t stats_interval_us = 10'000'000;
  StatsOptions stats;
  StateOptions state;
  SenderOptions sender;
  std::int64_t replay_timeout_us = 2'000'000;  // no reply this long: resync
  std::size_t max_buffered_batches = 10000;    // live batches held during a replay
  std::string http_bind_address = ":9102";     // /metrics and /healthz; empty = off
  base::LogFormat log_format = base::LogFormat::json;
  base::LogLevel log_level = base::LogLevel::info;
};

struct ConfigOutcome {
  std::optional<AdapterConfig> config;  // set when the adapter should run
  int exit_code = 0;                    // 0 for --help/--version, 2 for a bad command line
  std::string message;                  // usage text, version, or ONE error line
};

// Parses and validates argv. Unknown flags, bad values and bad combinations give exit code 2.
ConfigOutcome parse_config(int argc, const char* const* argv);

// `tcp://host:port` with the port moved by `offset` (DP rank r listens on port + r); the
// endpoint unchanged when it has no numeric port (ipc://, inproc://).
std::string offset_endpoint(const std::string& endpoint, int offset);

// "1=sql-lora,2=chat-lora" → {1: "sql-lora", 2: "chat-lora"}; nullopt on a bad entry.
std::optional<std::map<std::int64_t, std::string>> parse_lora_names(const std::string& text);

// The replica name of DP rank `rank`: the replica id when dp_size is 1, else "<id>/dp<rank>".
std::string replica_name(const std::string& replica_id, int dp_size, std::int64_t rank);

// Program version for --version and client_version.
inline constexpr const char* kVersion = "inferencecache-kvevents 0.1.0";

}  // namespace ic::tools::kvevents
