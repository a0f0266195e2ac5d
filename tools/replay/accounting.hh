// What the replay measures per policy: hit tokens, load balance over the run and per time
// window, the unbounded-cache upper bound, and LookupRoute reasons.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/trace.hh"

namespace ic::tools::replay {

// Requests that ARRIVED in one trace time window [index·window_ms, (index+1)·window_ms).
struct Window {
  std::int64_t hit_tokens = 0;
  std::int64_t prompt_tokens = 0;
  std::vector<std::int64_t> requests;  // per replica
  double ttft_ms_sum = 0;              // Σ TTFT of those requests, ms
};

// max / mean of per-replica request counts (1.0 = perfectly even; N = all on one replica);
// 0 when there were no requests.
double max_over_mean(const std::vector<std::int64_t>& requests);

// Load balance of one policy: over the whole run and over time windows.
struct Balance {
  double overall = 0;       // max/mean of total requests per replica
  double window_mean = 0;   // mean over non-empty windows of their max/mean
  double window_worst = 0;  // worst non-empty window
};

class PolicyAccount {
 public:
  PolicyAccount(std::size_t replicas, std::int64_t window_ms);

  // Records one served request that arrived at trace time `timestamp_ms`: its prefix hit, its
  // time to first token (ms) and the prefill work it cost its replica (uncached tokens / rate, ms).
  void add(std::int64_t timestamp_ms, std::size_t replica, std::int64_t hit_tokens,
           std::int64_t prompt_tokens, double ttft_ms = 0, double work_ms = 0);

  // Totals over the run: hit tokens, prompt tokens, requests.
  std::int64_t hit_tokens() const { return hit_tokens_; }
  std::int64_t prompt_tokens() const { return prompt_tokens_; }
  std::int64_t requests() const { return requests_; }
  // hit tokens / prompt tokens, 0 when nothing ran.
  double hit_ratio() const;
  // Requests per replica over the run.
  const std::vector<std::int64_t>& requests_per_replica() const { return per_replica_; }
  // Every window from trace time 0 to the last request (empty ones included).
  const std::vector<Window>& windows() const { return windows_; }
  // Load balance over the run and over the non-empty windows.
  Balance balance() const;
  // Every request's TTFT in µs (rounded to the nearest), in the order they finished.
  const std::vector<std::uint64_t>& ttft_us() const { return ttft_us_; }
  // Prefill work per replica over the run (Σ uncached tokens / rate), ms.
  const std::vector<double>& work_ms_per_replica() const { return work_ms_; }
  // max / mean of work_ms_per_replica (1.0 = even; 0 when no work).
  double work_max_over_mean() const;

 private:
  Window& window_at(std::int64_t timestamp_ms);
  std::size_t replicas_;
  std::int64_t window_ms_;
  std::int64_t hit_tokens_ = 0;
  std::int64_t prompt_tokens_ = 0;
  std::int64_t requests_ = 0;
  std::vector<std::int64_t> per_replica_;
  std::vector<double> work_ms_;
  std::vector<std::uint64_t> ttft_us_;
  std::vector<Window> windows_;
};

// The unbounded-cache upper bound: one cache that never evicts and sees every request, so a
// request hits the longest leading run of blocks any earlier request stored.
class UpperBound {
 public:
  explicit UpperBound(std::int64_t window_ms) : account_(1, window_ms) {}
  // Returns the request's hit tokens under the bound and then stores its blocks.
  std::int64_t add(const TraceRequest& request);
  // The bound's totals and windows (as one replica).
  const PolicyAccount& account() const { return account_; }

 private:
  std::unordered_set<std::uint64_t> seen_;
  PolicyAccount account_;
};

}  // namespace ic::tools::replay
