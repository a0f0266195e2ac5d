#include "gateway/endpoint_directory.hh"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "gateway/endpoints.hh"
#include "index/shard.hh"
#include "runtime/map_reduce.hh"

namespace ic::gateway {
namespace {

void sort_distinct(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

void EndpointDirectory::find(sharding::ShardedIndex& index, std::string model, Done done) {
  const std::int64_t now = index.clock().monotonic_us();
  if (fetched_ && now - fetched_mono_us_ < kFreshUs) return done(cached(model));
  waiting_.emplace_back(std::move(model), std::move(done));
  if (refreshing_) return;
  refreshing_ = true;
  runtime::map_reduce<Pairs>(
      index.cores(),
      [&index](unsigned core) {
        Pairs pairs;
        std::unordered_set<std::string> seen;  // "model\0endpoint": a replica's stats per tenant
        index.shard(core).export_stats([&](const index::StatsView& s) {
          if (pairs.size() >= kMaxPairs || !is_endpoint(s.replica)) return;
          std::string key(s.model);
          key.push_back('\0');
          key.append(s.replica);
          if (seen.insert(std::move(key)).second) pairs.emplace_back(s.model, s.replica);
        });
        return pairs;
      },
      [this, &index](std::vector<std::optional<Pairs>> values) {
        std::vector<Pairs> per_core;
        for (auto& v : values)
          if (v) per_core.push_back(std::move(*v));
        refreshed(index.clock().monotonic_us(), std::move(per_core));
      },
      runtime::MapReduceOptions{kRefreshDeadlineUs, 1'000});
}

void EndpointDirectory::refreshed(std::int64_t now_mono_us, std::vector<Pairs>&& per_core) {
  by_model_.clear();
  all_.clear();
  std::size_t kept = 0;
  for (Pairs& pairs : per_core) {
    for (auto& [model, endpoint] : pairs) {
      if (kept++ >= kMaxPairs) break;
      all_.push_back(endpoint);
      by_model_[std::move(model)].push_back(std::move(endpoint));
    }
  }
  sort_distinct(all_);
  for (auto& [model, endpoints] : by_model_) sort_distinct(endpoints);
  fetched_mono_us_ = now_mono_us;
  fetched_ = true;
  refreshing_ = false;
  // A `done` may start another pick; it finds the copy fresh.
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [model, done] : waiting) done(cached(model));
}

std::vector<std::string> EndpointDirectory::cached(std::string_view model) const {
  if (model.empty()) return all_;
  const auto it = by_model_.find(std::string(model));
  return it != by_model_.end() ? it->second : all_;
}

EndpointDirectory& EndpointDirectory::local() {
  thread_local EndpointDirectory directory;
  return directory;
}

}  // namespace ic::gateway
