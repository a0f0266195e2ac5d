// Latency samples → percentiles and a log2 histogram, shared by replay and bench.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace ic::tools {

// Nearest-rank percentile (the smallest sample with at least q·n samples at or below it):
// sorted[ceil(q·n) − 1], q in [0, 1]; q = 0 gives the minimum. `sorted` must be ascending.
// Returns 0 for an empty vector.
std::uint64_t percentile(const std::vector<std::uint64_t>& sorted, double q);

// Summary of a set of latency samples, all in µs (mean rounded down).
struct LatencySummary {
  std::uint64_t count = 0;
  std::uint64_t min_us = 0;
  std::uint64_t mean_us = 0;
  std::uint64_t p50_us = 0;
  std::uint64_t p90_us = 0;
  std::uint64_t p99_us = 0;
  std::uint64_t p999_us = 0;
  std::uint64_t max_us = 0;
};

// Sorts `samples_us` in place and summarizes them (all zero when empty).
LatencySummary summarize(std::vector<std::uint64_t>& samples_us);

// nlohmann::json(summary): {"count":..,"max_us":..,"mean_us":..,"min_us":..,"p50_us":..,
// "p90_us":..,"p999_us":..,"p99_us":..} (nlohmann::json orders keys by name).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LatencySummary, count, min_us, mean_us, p50_us, p90_us, p99_us,
                                   p999_us, max_us)

// One histogram bucket: samples with lower_us <= v < upper_us.
struct HistogramBucket {
  std::uint64_t lower_us = 0;
  std::uint64_t upper_us = 0;
  std::uint64_t count = 0;
};
// nlohmann::json(bucket): {"count":..,"lower_us":..,"upper_us":..}.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HistogramBucket, lower_us, upper_us, count)

// Power-of-two buckets [0,1), [1,2), [2,4), [4,8) µs ... covering every sample; only buckets
// from the first to the last non-empty one are returned. `sorted` need not be sorted.
std::vector<HistogramBucket> log2_histogram(const std::vector<std::uint64_t>& samples_us);

}  // namespace ic::tools
