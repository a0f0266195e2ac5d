#include "replay/router.hh"

#include <array>
#include <charconv>

namespace ic::tools::replay {

std::string_view policy_name(Policy policy) {
  constexpr std::array<std::string_view, 4> kNames = {"round-robin", "least-loaded",
                                                      "inferencecache", "cost-router"};
  static_assert(kNames.size() == static_cast<std::size_t>(Policy::kCostRouter) + 1);
  return kNames[static_cast<std::size_t>(policy)];
}

std::string_view gateway_name(Gateway gateway) {
  return gateway == Gateway::kFollow ? "follow" : "override";
}

std::optional<std::size_t> replica_index(const std::string& id, std::size_t replicas) {
  constexpr std::string_view kPrefix = "replica-";
  if (id.size() <= kPrefix.size() || id.compare(0, kPrefix.size(), kPrefix) != 0) {
    return std::nullopt;
  }
  std::size_t index = 0;
  const char* first = id.data() + kPrefix.size();
  const char* last = id.data() + id.size();
  auto [ptr, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || ptr != last || index >= replicas) return std::nullopt;
  return index;
}

Choice Router::choose(Cluster& cluster, std::int64_t now_ms, int slots,
                      const inferencecache::v1alpha1::LookupRouteResponse* response) {
  Choice choice;
  if (policy_ == Policy::kRoundRobin) {
    choice.replica = next_++ % replicas_;
    return choice;
  }
  if (policy_ == Policy::kInferenceCache && response != nullptr &&
      (response->reason_code() == "PREFIX_MATCH" || response->reason_code() == "AFFINITY_HINT")) {
    for (const auto& score : response->replica_scores()) {
      auto index = replica_index(score.replica_id(), replicas_);
      if (!index) continue;
      if (gateway_ == Gateway::kFollow || cluster.in_flight(*index, now_ms) < slots) {
        choice.replica = *index;
        choice.followed_hint = true;
        return choice;
      }
      choice.saturated_override = true;
    }
  }
  choice.replica = cluster.least_loaded(now_ms);
  return choice;
}

Choice Router::choose(Cluster& cluster, const TraceRequest& request, int slots,
                      const inferencecache::v1alpha1::LookupRouteResponse* response) {
  if (policy_ != Policy::kCostRouter) return choose(cluster, request.timestamp_ms, slots, response);
  Choice choice;
  choice.replica = cheapest(cluster, request);
  remember(choice.replica);
  return choice;
}

std::size_t Router::cheapest(const Cluster& cluster, const TraceRequest& request) const {
  std::size_t best = 0;
  std::int64_t best_cost = INT64_MAX;
  const auto blocks = static_cast<std::int64_t>(request.hash_ids.size());
  for (std::size_t r = 0; r < replicas_; ++r) {
    const auto hits = static_cast<std::int64_t>(cluster.leading_hits(r, request));
    const std::int64_t cost = (blocks - hits) + recent_count_[r];
    if (cost < best_cost) {
      best = r;
      best_cost = cost;
    }
  }
  return best;
}

void Router::remember(std::size_t replica) {
  recent_.push_back(replica);
  ++recent_count_[replica];
  if (recent_.size() > kCostRouterWindow) {
    --recent_count_[recent_.front()];
    recent_.pop_front();
  }
}

}  // namespace ic::tools::replay
