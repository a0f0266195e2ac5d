#include "sharding/pd_metrics.hh"

#include <algorithm>
#include <string>

#include "metrics/core_metrics.hh"

namespace ic::sharding {

namespace {
// Written once before the reactors start (their threads' start orders it
// before every read); default: unregistered, counts nothing.
metrics::CoreFamilyId<PdFigures> g_pd;

constexpr std::string_view kCalls = "lookup_pd_route_calls_total";
constexpr std::string_view kLatency = "lookup_pd_route_latency_seconds";

std::size_t reason_slot(std::string_view code) {
  const auto it = std::find(kPdReasonLabels.begin(), kPdReasonLabels.end() - 1, code);
  return static_cast<std::size_t>(it - kPdReasonLabels.begin());  // the last: OTHER
}
}  // namespace

void PdFigures::add(std::string_view reason_code, std::int64_t latency_us) {
  ++calls[reason_slot(reason_code)];
  const std::int64_t us = std::max<std::int64_t>(latency_us, 0);
  // First bound ≥ us; past the last bound only `count` (the +Inf bucket) sees it.
  const auto bound =
      std::lower_bound(metrics::kLatencyBucketsUs.begin(), metrics::kLatencyBucketsUs.end(), us);
  if (bound != metrics::kLatencyBucketsUs.end()) {
    ++buckets[static_cast<std::size_t>(bound - metrics::kLatencyBucketsUs.begin())];
  }
  ++count;
  sum_us += static_cast<std::uint64_t>(us);
}

void PdFigures::merge(const PdFigures& other) {
  for (std::size_t i = 0; i < calls.size(); ++i) calls[i] += other.calls[i];
  for (std::size_t i = 0; i < buckets.size(); ++i) buckets[i] += other.buckets[i];
  count += other.count;
  sum_us += other.sum_us;
}

void PdFigures::render(metrics::Writer& w) const {
  w.family(kCalls, "counter", "LookupPDRoute calls by reason code.");
  for (std::size_t r = 0; r < kPdReasonLabels.size(); ++r) {
    w.sample(kCalls, {{"reason_code", kPdReasonLabels[r]}}, calls[r]);
  }
  w.family(kLatency, "histogram", "LookupPDRoute latency in seconds.");
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < metrics::kLatencyBucketCount; ++b) {
    cumulative += buckets[b];
    const std::string le =
        metrics::format_double(static_cast<double>(metrics::kLatencyBucketsUs[b]) / 1e6);
    w.sample(kLatency, {{"le", le}}, cumulative, "_bucket");
  }
  w.sample(kLatency, {{"le", "+Inf"}}, count, "_bucket");
  w.sample(kLatency, {}, static_cast<double>(sum_us) / 1e6, "_sum");
  w.sample(kLatency, {}, count, "_count");
}

void register_pd_metrics(metrics::Registry& registry) {
  g_pd = registry.add_core_family<PdFigures>(metrics::RenderAfter::kPromptTextFailures);
}

void record_pd_route(std::string_view reason_code, std::int64_t latency_us) {
  if (PdFigures* f = metrics::local().family(g_pd)) f->add(reason_code, latency_us);
}

}  // namespace ic::sharding
