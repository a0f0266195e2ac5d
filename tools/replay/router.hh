// The routing policies the replay compares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "replay/cluster.hh"

namespace ic::tools::replay {

// The routing policies compared (see Router::choose).
enum class Policy { kRoundRobin, kLeastLoaded, kInferenceCache };

// "round-robin", "least-loaded", "inferencecache".
std::string_view policy_name(Policy policy);

// Index of a "replica-K" id below `replicas`; nullopt for anything else (a foreign replica).
std::optional<std::size_t> replica_index(const std::string& id, std::size_t replicas);

// Where a request goes and why.
struct Choice {
  std::size_t replica = 0;
  bool followed_hint = false;       // took a replica from replica_scores
  bool saturated_override = false;  // every hinted replica was saturated: fell back to least-loaded
};

class Router {
 public:
  // A router for `replicas` replicas named replica-0 … replica-(N−1).
  Router(Policy policy, std::size_t replicas) : policy_(policy), replicas_(replicas) {}

  // round-robin: i mod N. least-loaded: Cluster::least_loaded. inferencecache: on PREFIX_MATCH or
  // AFFINITY_HINT, the first replica of replica_scores (best score first) that is not saturated
  // (in-flight < slots, like a gateway's load guard); otherwise — any other reason, a failed call
  // (`response` null) or all hinted replicas saturated — least-loaded.
  Choice choose(Cluster& cluster, std::int64_t now_ms, int slots,
                const inferencecache::v1alpha1::LookupRouteResponse* response);

 private:
  Policy policy_;
  std::size_t replicas_;
  std::size_t next_ = 0;
};

}  // namespace ic::tools::replay
