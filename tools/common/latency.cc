#include "common/latency.hh"

#include <algorithm>
#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>

namespace ic::tools {

std::uint64_t percentile(const std::vector<std::uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // ceil(q·n) computed on integers where possible to avoid 0.999·1000 = 998.9999… surprises.
  const double exact = q * static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(exact - 1e-9));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

LatencySummary summarize(std::vector<std::uint64_t>& samples_us) {
  LatencySummary s;
  if (samples_us.empty()) return s;
  std::sort(samples_us.begin(), samples_us.end());
  s.count = samples_us.size();
  s.min_us = samples_us.front();
  s.max_us = samples_us.back();
  long double total = 0;
  for (auto v : samples_us) total += static_cast<long double>(v);
  s.mean_us = static_cast<std::uint64_t>(total / static_cast<long double>(s.count));
  s.p50_us = percentile(samples_us, 0.50);
  s.p90_us = percentile(samples_us, 0.90);
  s.p99_us = percentile(samples_us, 0.99);
  s.p999_us = percentile(samples_us, 0.999);
  return s;
}

std::vector<HistogramBucket> log2_histogram(const std::vector<std::uint64_t>& samples_us) {
  // Bucket 0 holds 0; bucket k >= 1 holds [2^(k-1), 2^k).
  std::vector<std::uint64_t> counts(65, 0);
  for (auto v : samples_us) ++counts[static_cast<std::size_t>(std::bit_width(v))];
  std::vector<HistogramBucket> buckets;
  auto first = std::find_if(counts.begin(), counts.end(), [](auto c) { return c > 0; });
  if (first == counts.end()) return buckets;
  auto last = std::find_if(counts.rbegin(), counts.rend(), [](auto c) { return c > 0; });
  const auto lo = static_cast<std::size_t>(first - counts.begin());
  const auto hi = static_cast<std::size_t>(counts.rend() - last) - 1;
  for (std::size_t k = lo; k <= hi; ++k) {
    HistogramBucket b;
    b.lower_us = k == 0 ? 0 : (std::uint64_t{1} << (k - 1));
    b.upper_us = k == 0 ? 1 : (k >= 64 ? UINT64_MAX : (std::uint64_t{1} << k));
    b.count = counts[k];
    buckets.push_back(b);
  }
  return buckets;
}

}  // namespace ic::tools
