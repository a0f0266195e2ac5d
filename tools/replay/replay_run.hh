// The replay loop: the trace's requests arrive at their own timestamps and go, for every policy,
// through a router onto that policy's simulated FIFO prefill replicas; prefill ends tell the
// server what the engine stored and evicted. One time line for all policies, in trace time; when
// the InferenceCache policy talks to a server (which keeps wall time: its entries and bookings age
// by it), that time line is paced on the wall clock at trace time / speed. The in-process index
// (in_process_index_client.hh) keeps trace time instead (IndexClient::at): nothing is paced.
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

// Which clock the time line runs on.
//   kAuto:    the wall clock when a policy talks to a server, else virtual.
//   kWall:    the wall clock (trace time / speed) even without a server lane.
//   kVirtual: as fast as possible (a server then sees the run compressed to its own speed: for
//             tests with a fake index, not for measurements).
enum class Clock { kAuto, kWall, kVirtual };

// Knobs of one replay (flags in main.cc).
struct ReplayOptions {
  std::size_t replicas = 8;
  std::size_t capacity_blocks = 2000;         // per replica, 512-token blocks
  std::vector<double> prefill_rates{6000.0};  // tokens/s; replica i runs at [i mod size()]
  int slots = 16;  // requests queued or in prefill at pressure 1.0 (and the override guard)
  std::int64_t window_ms = 60'000;         // balance and chart window (trace time)
  std::int64_t stats_interval_ms = 1'000;  // ReplicaStats cadence (trace time); 0 = none
  Clock clock = Clock::kAuto;
  double speed = 10.0;                   // wall time = trace time / speed when paced
  std::string tenant_prefix = "replay";  // tenant of a policy = prefix + "-" + policy name
  std::string model_id = "mooncake-conversation";
  std::string hash_scheme = "mooncake";
  bool clear_at_end = true;  // ALL_CLEARED for every simulated replica when done
  int max_consecutive_errors = 50;
  Gateway gateway = Gateway::kFollow;  // how the inferencecache lane treats a hint it follows
  double follow_fraction = 1.0;        // share of hints the inferencecache lane follows
  bool report_pressure = true;  // ReplicaStats carry pressure (outstanding / slots); false: 0
  std::vector<Policy> policies = {Policy::kRoundRobin, Policy::kLeastWork, Policy::kFullKnowledge,
                                  Policy::kInferenceCache};
};

// Prefill rate of replica `replica` under `options`, tokens/s.
double replica_rate(const ReplayOptions& options, std::size_t replica);

// True when `policy` asks the server (LookupRoute) and reports to it (the others are simulated).
inline bool talks_to_server(Policy policy) { return policy == Policy::kInferenceCache; }

// True when the run is paced on the wall clock (see Clock).
bool paced(const ReplayOptions& options);

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
  std::int64_t ignored_hints = 0;  // not followed because of --follow-fraction
  std::int64_t saturated_overrides = 0;
  std::int64_t evictions = 0;
};

// Everything one replay measured.
struct ReplayResult {
  explicit ReplayResult(std::int64_t window_ms) : bound(window_ms) {}
  std::vector<PolicyResult> policies;
  UpperBound bound;
  std::int64_t requests_done = 0;     // arrived (and routed by every policy)
  bool paced = false;                 // on the wall clock
  std::vector<std::uint64_t> lag_us;  // paced: how late each event ran behind its wall time
  double wall_s = 0;                  // the run's wall time
  bool interrupted = false;
  std::string fatal_error;  // non-empty: the run stopped early because of the server
};

// Runs the replay until every arrived request finished its prefill. Stops early on Ctrl-C
// (interrupted) or when the server fails (fatal_error); the result then covers the requests
// finished so far.
ReplayResult run_replay(const std::vector<TraceRequest>& trace, const ReplayOptions& options,
                        IndexClient& client, ProgressBar& progress);

}  // namespace ic::tools::replay
