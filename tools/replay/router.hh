// The routing policies the replay compares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "replay/cluster.hh"

namespace ic::tools::replay {

// The routing policies compared (see Router::choose).
enum class Policy { kRoundRobin, kLeastWork, kInferenceCache, kFullKnowledge };

// "round-robin", "least-work", "inferencecache", "full-knowledge".
std::string_view policy_name(Policy policy);
// The policy named `name` (as policy_name spells it); nullopt for anything else.
std::optional<Policy> parse_policy(std::string_view name);

// How the simulated gateway treats an InferenceCache hint it follows.
//   kFollow:   takes the top replica of PREFIX_MATCH / AFFINITY_HINT as given (what the contract
//              tells gateway SDKs to do).
//   kOverride: skips hinted replicas that are saturated in the simulation (requests queued or in
//              prefill >= slots: a gateway's own load guard), least-work when all are.
enum class Gateway { kFollow, kOverride };

// "follow", "override".
std::string_view gateway_name(Gateway gateway);

// Index of a "replica-K" id below `replicas`; nullopt for anything else (a foreign replica).
std::optional<std::size_t> replica_index(const std::string& id, std::size_t replicas);

// Whether the gateway follows the hint for trace request `index` under `follow_fraction`
// (0..1): 1 follows every hint, 0 none; otherwise a fixed pseudo-random choice per request
// (SplitMix64 of the index, as a fraction of 2^64, < follow_fraction), the same in every run.
bool follows_hint(std::size_t index, double follow_fraction);

// Where a request goes and why.
struct Choice {
  std::size_t replica = 0;
  bool followed_hint = false;       // took a replica from replica_scores
  bool ignored_hint = false;        // had a hint but --follow-fraction said not to follow it
  bool saturated_override = false;  // override gateway: every hinted replica was saturated
};

class Router {
 public:
  // A router for `replicas` replicas named replica-0 … replica-(N−1). `slots`: the override
  // gateway's saturation bound; `follow_fraction`: see follows_hint.
  Router(Policy policy, std::size_t replicas, Gateway gateway = Gateway::kFollow, int slots = 16,
         double follow_fraction = 1.0)
      : policy_(policy),
        gateway_(gateway),
        replicas_(replicas),
        slots_(slots),
        follow_fraction_(follow_fraction) {}

  // Picks the replica for trace request `index` (`request`) arriving at trace time now_ms.
  //   round-robin:    i mod N over the requests this router has routed.
  //   least-work:     least Cluster::outstanding_prompt_ms (no cache knowledge), then fewest
  //                   requests routed, then the lowest index.
  //   full-knowledge: least expected TTFT = Cluster::expected_wait_ms + (prompt −
  //                   Cluster::expected_hit_tokens) / rate (queue wait + uncached prefill, the
  //                   rule of Mooncake's conductor), then fewest routed, then the lowest index.
  //   inferencecache: on PREFIX_MATCH or AFFINITY_HINT (and when follows_hint says so), the
  //                   first replica of replica_scores (override gateway: the first unsaturated);
  //                   anything else — another reason, a failed call (`response` null) — least-work.
  Choice choose(const Cluster& cluster, std::size_t index, const TraceRequest& request,
                double now_ms, const inferencecache::v1alpha1::LookupRouteResponse* response);

 private:
  std::size_t least_work(const Cluster& cluster, double now_ms) const;
  std::size_t least_expected_ttft(const Cluster& cluster, const TraceRequest& request,
                                  double now_ms) const;

  Policy policy_;
  Gateway gateway_;
  std::size_t replicas_;
  int slots_;
  double follow_fraction_;
  std::size_t next_ = 0;
};

}  // namespace ic::tools::replay
