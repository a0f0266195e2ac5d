// What the bench sends: pre-framed request bodies (built once, shared by every call) and the
// order to send them in, from a Mooncake trace or synthetic (block count, replicas, hit ratio).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/requests.hh"
#include "common/trace.hh"

namespace ic::tools::bench {

// Method paths (docs/contract.md "Identity").
inline constexpr const char* kLookupPath = "/inferencecache.v1alpha1.InferenceCache/LookupRoute";
inline constexpr const char* kReportPath =
    "/inferencecache.v1alpha1.InferenceCache/ReportCacheState";

// The measured method: LookupRoute or ReportCacheState (one update per call).
enum class Rpc { kLookup, kReport };

// Everything the workers send, built before the run.
struct Workload {
  std::string path;                                        // the measured method
  std::vector<std::shared_ptr<const std::string>> bodies;  // gRPC-framed request bodies
  std::vector<std::uint32_t> order;  // call k sends bodies[order[k % order.size()]]
  // ReportCacheState bodies sent (and acknowledged) before the measurement so lookups hit.
  std::vector<std::shared_ptr<const std::string>> preload;
};

// Synthetic requests: `distinct` prompts of `blocks` blocks (random 8-byte hashes from `seed`,
// 512 tokens each) preloaded round-robin over `replicas`; each lookup asks a preloaded prompt
// with probability `hit_ratio`, else a never-stored one (deterministic for a given seed).
// With Rpc::kReport every call stores one prompt (no preload).
struct SyntheticSpec {
  int blocks = 8;
  int replicas = 8;
  double hit_ratio = 0.9;
  int distinct = 1024;
  std::uint64_t seed = 1;
};
Workload synthetic_workload(const SyntheticSpec& spec, const Scope& scope, Rpc rpc);

// Trace requests in order, cycled. With `preload`, request i's blocks are first stored on
// replica i mod `replicas` (so lookups of later turns can hit); kReport stores them as the
// measured calls instead.
Workload trace_workload(const std::vector<TraceRequest>& trace, const Scope& scope, Rpc rpc,
                        int replicas, bool preload);

}  // namespace ic::tools::bench
