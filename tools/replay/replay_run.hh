// The replay loop: every trace request, in order, through every policy (interleaved, so one
// run compares them on the same trace time line).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/progress.hh"
#include "common/requests.hh"
#include "common/trace.hh"
#include "replay/accounting.hh"
#include "replay/cluster.hh"
#include "replay/index_client.hh"
#include "replay/router.hh"

namespace ic::tools::replay {

// Knobs of one replay (flags in main.cc).
struct ReplayOptions {
  std::size_t replicas = 8;
  std::size_t capacity_blocks = 3000;  // per replica; see tools/replay/README.md for why
  EngineModel engine;
  std::int64_t window_ms = 60'000;         // load-balance and chart window (trace time)
  std::int64_t stats_interval_ms = 1'000;  // ReplicaStats cadence (trace time)
  bool realtime = false;                   // pace requests at trace time / speed
  double speed = 1.0;
  std::string tenant_prefix = "replay";  // tenant of a policy = prefix + "-" + policy name
  std::string model_id = "mooncake-conversation";
  std::string hash_scheme = "mooncake";
  bool clear_at_end = true;  // ALL_CLEARED for every simulated replica when done
  int max_consecutive_errors = 50;
  Gateway gateway = Gateway::kFollow;  // how the inferencecache lane treats a hint
  bool report_pressure = true;         // ReplicaStats carry pressure (in-flight / slots); false: 0
  std::vector<Policy> policies = {Policy::kRoundRobin, Policy::kLeastLoaded,
                                  Policy::kInferenceCache};
};

// Everything measured for one policy.
struct PolicyResult {
  PolicyResult(Policy p, Scope s, const ReplayOptions& options)
      : policy(p), scope(std::move(s)), account(options.replicas, options.window_ms) {}
  Policy policy;
  Scope scope;
  PolicyAccount account;
  std::vector<std::uint64_t> lookup_us;         // client-side LookupRoute latency per call
  std::map<std::string, std::int64_t> reasons;  // reason_code → calls
  std::map<std::string, std::int64_t> errors;   // gRPC status name → failed calls
  std::int64_t followed_hints = 0;
  std::int64_t saturated_overrides = 0;
  std::int64_t evictions = 0;
};

// Everything one replay measured.
struct ReplayResult {
  explicit ReplayResult(std::int64_t window_ms) : bound(window_ms) {}
  std::vector<PolicyResult> policies;
  UpperBound bound;
  std::int64_t requests_done = 0;
  bool interrupted = false;
  std::string fatal_error;  // non-empty: the run stopped early because of the server
};

// Runs the replay. Stops early on Ctrl-C (interrupted) or when the server fails
// (fatal_error); the result then covers the requests done so far.
ReplayResult run_replay(const std::vector<TraceRequest>& trace, const ReplayOptions& options,
                        IndexClient& client, ProgressBar& progress);

}  // namespace ic::tools::replay
