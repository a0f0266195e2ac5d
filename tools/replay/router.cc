#include "replay/router.hh"

#include <charconv>

namespace ic::tools::replay {

std::string_view policy_name(Policy policy) {
  switch (policy) {
    case Policy::kRoundRobin:
      return "round-robin";
    case Policy::kLeastLoaded:
      return "least-loaded";
    case Policy::kInferenceCache:
      return "inferencecache";
  }
  return "unknown";
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
      if (cluster.in_flight(*index, now_ms) < slots) {
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

}  // namespace ic::tools::replay
