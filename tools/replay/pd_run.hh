// The replay's P/D mode (docs/pd-routing.md, tools/README.md "P/D mode"): a prefill pool and a
// decode pool of simulated engines on trace time. A request is either a pair — FIFO prefill on a
// prefill replica, then the KV transfer to the decode replica (time by topology distance), then
// decode — or decode-only: the decode replica prefills it itself (its running decodes make no
// progress meanwhile), then decodes. A decode replica runs at most `decode_slots` decodes; each
// decode step gives every running decode one token and takes step_ms + step_per_seq_ms × the
// decodes running during it, so a decode that joins slows the others from then on and one that
// ends speeds them up. Measured per policy: TTFT (arrival → first token) and time between tokens
// (the decode's duration, slot start to last token, pauses included, / output tokens).
//
// Policies: the full-knowledge pair router (the option of least expected TTFT from the true
// queues, caches and slots), llm-d's decode-first rule (decode replica by prefix 2 + load 1, then
// prefill by prefix 2 + queue 1 + affinity when the uncached tokens there reach the threshold),
// and InferenceCache (LookupPDRoute against the server, followed; decode-first when it names no
// replica).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/progress.hh"
#include "common/trace.hh"
#include "replay/index_client.hh"
#include "replay/replay_run.hh"

namespace ic::tools::replay {

enum class PdPolicy { kFullKnowledge, kDecodeFirst, kInferenceCache };

// "full-knowledge", "decode-first", "inferencecache".
std::string_view pd_policy_name(PdPolicy policy);

// Knobs of one P/D replay (flags in main.cc, "--pd").
struct PdOptions {
  std::size_t prefill_replicas = 4;
  std::size_t decode_replicas = 4;
  std::size_t capacity_blocks = 2000;  // per replica, both pools, 512-token blocks
  double prefill_rate = 9000;          // tokens/s, both pools (a decode replica's own prefill too)
  int decode_slots = 16;               // decodes a decode replica runs at once
  double step_ms = 20;                 // one decode step with one running decode, ms
  double step_per_seq_ms = 1;          // added to a step per running decode, ms
  // KV transfer, ms per 1,000 tokens, by the pair's nearest shared level: host, rack, zone, none.
  // Replica k of each pool runs on host k; racks hold 2 hosts, zones 2 racks.
  double transfer_ms_per_1k[4] = {6, 13, 32, 64};
  std::int64_t min_uncached_tokens = 2048;  // disaggregate at or above (all three policies)
  std::int64_t stats_interval_ms = 1000;    // ReplicaStats cadence, trace time; 0 = none
  Clock clock = Clock::kAuto;
  double speed = 10.0;
  std::string tenant_prefix = "replay";
  std::string model_id = "mooncake-conversation";
  std::string hash_scheme = "mooncake";
  std::string topology = "replay-pd";  // pd_topology_ref
  double affinity_weight = 0.1;        // the topology's affinityWeight (pd_topology_json)
  bool clear_at_end = true;
  int max_consecutive_errors = 50;
  std::vector<PdPolicy> policies = {PdPolicy::kFullKnowledge, PdPolicy::kDecodeFirst,
                                    PdPolicy::kInferenceCache};
};

// The policy document with this replay's topology (docs/pd-routing.md "Topology"), for the
// server's --policy-file or POST /policy; decodeHoldMs is the mean decode of `trace` in wall ms.
std::string pd_topology_json(const PdOptions& options, const std::vector<TraceRequest>& trace);

// Replica names: "prefill-K", "decode-K".
std::string prefill_id(std::size_t k);
std::string decode_id(std::size_t k);

// Everything measured for one policy (trace time).
struct PdPolicyResult {
  PdPolicy policy;
  std::string tenant;
  std::vector<double> ttft_ms;  // one per request
  std::vector<double> tbt_ms;   // one per request with output tokens
  std::int64_t pairs = 0;
  std::int64_t decode_only = 0;
  std::int64_t fallbacks = 0;  // inferencecache: answers without a replica, decode-first used
  std::map<std::string, std::int64_t> reasons;
  std::map<std::string, std::int64_t> errors;
  std::vector<std::uint64_t> lookup_us;
};

struct PdResult {
  std::vector<PdPolicyResult> policies;
  std::int64_t requests_done = 0;
  bool paced = false;
  std::vector<std::uint64_t> lag_us;
  double wall_s = 0;
  bool interrupted = false;
  std::string fatal_error;
};

// Runs the P/D replay until every request finished decoding (or Ctrl-C, or a server failure).
PdResult run_pd_replay(const std::vector<TraceRequest>& trace, const PdOptions& options,
                       IndexClient& client, ProgressBar& progress);

// The table: per policy mean / p50 / p90 TTFT (s) and mean / p50 / p90 TBT (ms), pairs and
// decode-only, then the acceptance ratios of issue 30.
std::string render_pd_text(const PdResult& result, const PdOptions& options,
                           const std::string& trace_path);
nlohmann::json render_pd_json(const PdResult& result, const PdOptions& options,
                              const std::string& trace_path);

}  // namespace ic::tools::replay
