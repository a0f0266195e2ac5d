#pragma once
// LookupPDRoute's families (docs/pd-routing.md "Metrics", docs/admin.md):
// inferencecache_lookup_pd_route_calls_total{reason_code} and the
// inferencecache_lookup_pd_route_latency_seconds histogram, counted on the
// core that answers (the owner core, or the connection's core for a
// fail-open answer), as LookupRoute's lookup_route_* families are. This room
// (the edge LookupPDRoute's answers pass through, pd_wire.hh) owns them and
// registers them with the metrics Registry (metrics/group.hh CoreFamily: a
// histogram beside counters).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "metrics/exposition.hh"
#include "metrics/registry.hh"
#include "metrics/sample.hh"

namespace ic::sharding {

// The reason codes LookupPDRoute answers (index/pd_query.hh pd_reason, then
// LookupRoute's fail-open NO_HINT, TIMEOUT, POLICY_REQUIRES_CHAIN), in the
// order they render; any other string counts as "OTHER" (the last).
inline constexpr std::array<std::string_view, 11> kPdReasonLabels = {"DISAGGREGATED",
                                                                     "DECODE_ONLY_SHORT",
                                                                     "DECODE_ONLY_CACHED",
                                                                     "NO_PREFILL_POOL",
                                                                     "NO_DECODE_IN_DOMAIN",
                                                                     "OVERLOADED",
                                                                     "UNKNOWN_TOPOLOGY",
                                                                     "NO_HINT",
                                                                     "TIMEOUT",
                                                                     "POLICY_REQUIRES_CHAIN",
                                                                     "OTHER"};

// One core's counts (a metrics CoreFamily value).
struct PdFigures {
  std::array<std::uint64_t, kPdReasonLabels.size()> calls{};  // by kPdReasonLabels
  // Latency (µs, the answer's lookup_latency_us) in the buckets of
  // metrics::kLatencyBucketsUs, non-cumulative; over the last bound only
  // `count` sees it.
  std::array<std::uint64_t, metrics::kLatencyBucketCount> buckets{};
  std::uint64_t count = 0;   // observations (the +Inf bucket)
  std::uint64_t sum_us = 0;  // total latency, µs

  // One answer (latency µs; negative counts as 0).
  void add(std::string_view reason_code, std::int64_t latency_us);
  // Sums another core's counts into these.
  void merge(const PdFigures& other);
  // Both families, every reason shown (0 included).
  void render(metrics::Writer& w) const;
};

// Registers the families with `registry`; once, before the runtime starts.
void register_pd_metrics(metrics::Registry& registry);

// One LookupPDRoute answer on the calling core (metrics::local()); nothing
// before register_pd_metrics ran.
void record_pd_route(std::string_view reason_code, std::int64_t latency_us);

}  // namespace ic::sharding
