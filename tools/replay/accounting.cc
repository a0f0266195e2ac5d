#include "replay/accounting.hh"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ic::tools::replay {

double max_over_mean(const std::vector<std::int64_t>& requests) {
  if (requests.empty()) return 0;
  const auto total = std::accumulate(requests.begin(), requests.end(), std::int64_t{0});
  if (total == 0) return 0;
  const auto max = *std::max_element(requests.begin(), requests.end());
  return static_cast<double>(max) * static_cast<double>(requests.size()) /
         static_cast<double>(total);
}

PolicyAccount::PolicyAccount(std::size_t replicas, std::int64_t window_ms)
    : replicas_(replicas),
      window_ms_(std::max<std::int64_t>(window_ms, 1)),
      per_replica_(replicas, 0),
      work_ms_(replicas, 0.0) {}

Window& PolicyAccount::window_at(std::int64_t timestamp_ms) {
  const auto index = static_cast<std::size_t>(std::max<std::int64_t>(timestamp_ms, 0) / window_ms_);
  while (windows_.size() <= index) {
    windows_.push_back(Window{0, 0, std::vector<std::int64_t>(replicas_, 0), 0.0});
  }
  return windows_[index];
}

void PolicyAccount::add(std::int64_t timestamp_ms, std::size_t replica, std::int64_t hit_tokens,
                        std::int64_t prompt_tokens, double ttft_ms, double work_ms) {
  auto& window = window_at(timestamp_ms);
  window.ttft_ms_sum += ttft_ms;
  ttft_us_.push_back(static_cast<std::uint64_t>(std::llround(std::max(0.0, ttft_ms) * 1000.0)));
  work_ms_[replica] += work_ms;
  window.hit_tokens += hit_tokens;
  window.prompt_tokens += prompt_tokens;
  ++window.requests[replica];
  hit_tokens_ += hit_tokens;
  prompt_tokens_ += prompt_tokens;
  ++requests_;
  ++per_replica_[replica];
}

double PolicyAccount::hit_ratio() const {
  if (prompt_tokens_ == 0) return 0;
  return static_cast<double>(hit_tokens_) / static_cast<double>(prompt_tokens_);
}

Balance PolicyAccount::balance() const {
  Balance b;
  b.overall = max_over_mean(per_replica_);
  int counted = 0;
  for (const auto& window : windows_) {
    const double ratio = max_over_mean(window.requests);
    if (ratio == 0) continue;
    b.window_mean += ratio;
    b.window_worst = std::max(b.window_worst, ratio);
    ++counted;
  }
  if (counted > 0) b.window_mean /= counted;
  return b;
}

double PolicyAccount::work_max_over_mean() const {
  const double total = std::accumulate(work_ms_.begin(), work_ms_.end(), 0.0);
  if (total <= 0) return 0;
  return *std::max_element(work_ms_.begin(), work_ms_.end()) *
         static_cast<double>(work_ms_.size()) / total;
}

std::int64_t UpperBound::add(const TraceRequest& request) {
  const auto counts = block_token_counts(request);
  std::int64_t hit = 0;
  for (std::size_t i = 0; i < request.hash_ids.size() && seen_.contains(request.hash_ids[i]); ++i) {
    hit += counts[i];
  }
  seen_.insert(request.hash_ids.begin(), request.hash_ids.end());
  account_.add(request.timestamp_ms, 0, hit, request.input_length);
  return hit;
}

}  // namespace ic::tools::replay
