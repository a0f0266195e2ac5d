#include "replay/router.hh"

#include <array>
#include <charconv>

namespace ic::tools::replay {

namespace {

constexpr std::array<std::string_view, 4> kPolicyNames = {"round-robin", "least-work",
                                                          "inferencecache", "full-knowledge"};
static_assert(kPolicyNames.size() == static_cast<std::size_t>(Policy::kFullKnowledge) + 1);

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool is_hint(const inferencecache::v1alpha1::LookupRouteResponse* response) {
  return response != nullptr &&
         (response->reason_code() == "PREFIX_MATCH" || response->reason_code() == "AFFINITY_HINT");
}

}  // namespace

std::string_view policy_name(Policy policy) {
  return kPolicyNames[static_cast<std::size_t>(policy)];
}

std::optional<Policy> parse_policy(std::string_view name) {
  for (std::size_t i = 0; i < kPolicyNames.size(); ++i) {
    if (kPolicyNames[i] == name) return static_cast<Policy>(i);
  }
  return std::nullopt;
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

bool follows_hint(std::size_t index, double follow_fraction) {
  if (follow_fraction >= 1.0) return true;
  if (follow_fraction <= 0.0) return false;
  // The top 53 bits as a double in [0, 1).
  const double u = static_cast<double>(splitmix64(index) >> 11) * 0x1.0p-53;
  return u < follow_fraction;
}

std::size_t Router::least_work(const Cluster& cluster, double now_ms) const {
  std::size_t best = 0;
  for (std::size_t r = 1; r < replicas_; ++r) {
    const double work = cluster.outstanding_prompt_ms(r, now_ms);
    const double best_work = cluster.outstanding_prompt_ms(best, now_ms);
    if (work < best_work || (work == best_work && cluster.routed(r) < cluster.routed(best))) {
      best = r;
    }
  }
  return best;
}

std::size_t Router::least_expected_ttft(const Cluster& cluster, const TraceRequest& request,
                                        double now_ms) const {
  std::size_t best = 0;
  double best_ttft = 0;
  for (std::size_t r = 0; r < replicas_; ++r) {
    const double ttft =
        cluster.expected_wait_ms(r, now_ms) +
        prefill_ms(request.input_length - cluster.expected_hit_tokens(r, request), cluster.rate(r));
    if (r == 0 || ttft < best_ttft ||
        (ttft == best_ttft && cluster.routed(r) < cluster.routed(best))) {
      best = r;
      best_ttft = ttft;
    }
  }
  return best;
}

Choice Router::choose(const Cluster& cluster, std::size_t index, const TraceRequest& request,
                      double now_ms,
                      const inferencecache::v1alpha1::LookupRouteResponse* response) {
  Choice choice;
  switch (policy_) {
    case Policy::kRoundRobin:
      choice.replica = next_++ % replicas_;
      return choice;
    case Policy::kFullKnowledge:
      choice.replica = least_expected_ttft(cluster, request, now_ms);
      return choice;
    case Policy::kLeastWork:
      break;
    case Policy::kInferenceCache:
      if (!is_hint(response)) break;
      if (!follows_hint(index, follow_fraction_)) {
        choice.ignored_hint = true;
        break;
      }
      for (const auto& score : response->replica_scores()) {
        auto hinted = replica_index(score.replica_id(), replicas_);
        if (!hinted) continue;
        if (gateway_ == Gateway::kFollow ||
            cluster.outstanding(*hinted) < static_cast<std::size_t>(slots_)) {
          choice.replica = *hinted;
          choice.followed_hint = true;
          return choice;
        }
        choice.saturated_override = true;
      }
      break;
  }
  choice.replica = least_work(cluster, now_ms);
  return choice;
}

}  // namespace ic::tools::replay
