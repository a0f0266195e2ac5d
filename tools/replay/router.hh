// The routing policies the replay compares.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "replay/cluster.hh"

namespace ic::tools::replay {

// The routing policies compared (see Router::choose).
enum class Policy { kRoundRobin, kLeastLoaded, kInferenceCache, kCostRouter };

// "round-robin", "least-loaded", "inferencecache", "cost-router".
std::string_view policy_name(Policy policy);

// How the simulated gateway treats an InferenceCache hint.
//   kFollow:   takes the top replica of PREFIX_MATCH / AFFINITY_HINT as given, least-loaded on
//              any other answer (what the contract tells gateway SDKs to do).
//   kOverride: skips hinted replicas that are saturated in the simulation (a gateway with its
//              own load guard), least-loaded when all are.
enum class Gateway { kFollow, kOverride };

// "follow", "override".
std::string_view gateway_name(Gateway gateway);

// Assignments the cost router remembers: its load term counts a replica's requests among them.
inline constexpr std::size_t kCostRouterWindow = 64;

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
  Router(Policy policy, std::size_t replicas, Gateway gateway = Gateway::kOverride)
      : policy_(policy), gateway_(gateway), replicas_(replicas), recent_count_(replicas, 0) {}

  // round-robin: i mod N. least-loaded: Cluster::least_loaded. inferencecache, override gateway:
  // on PREFIX_MATCH or AFFINITY_HINT, the first replica of replica_scores (best score first) that
  // is not saturated (in-flight < slots, like a gateway's load guard); otherwise — any other
  // reason, a failed call (`response` null) or all hinted replicas saturated — least-loaded.
  // inferencecache, follow gateway: the first replica of replica_scores on PREFIX_MATCH or
  // AFFINITY_HINT, whatever its load; least-loaded otherwise. (cost-router needs the request:
  // see the overload below; here it falls back to least-loaded.)
  Choice choose(Cluster& cluster, std::int64_t now_ms, int slots,
                const inferencecache::v1alpha1::LookupRouteResponse* response);

  // Same, for `request` at its trace time; cost-router: the full-knowledge router that sees every
  // simulated cache, cost = blocks of `request` not cached on the replica + 1 × the replica's
  // requests among the last kCostRouterWindow assignments; lowest cost, then lowest index.
  Choice choose(Cluster& cluster, const TraceRequest& request, int slots,
                const inferencecache::v1alpha1::LookupRouteResponse* response);

 private:
  std::size_t cheapest(const Cluster& cluster, const TraceRequest& request) const;
  void remember(std::size_t replica);

  Policy policy_;
  Gateway gateway_;
  std::size_t replicas_;
  std::size_t next_ = 0;
  std::deque<std::size_t> recent_;          // the cost router's last assignments, oldest first
  std::vector<std::int64_t> recent_count_;  // per replica: its entries in recent_
};

}  // namespace ic::tools::replay
