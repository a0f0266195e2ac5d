#pragma once
// Plain-value copies of metrics, made on the owning core during a scrape and
// merged on the scraping core (docs/admin.md: "per-core counters, summed on
// scrape"). Nothing here is touched by the hot path.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "buildinfo/build_info.hh"
#include "metrics/group.hh"
#include "metrics/grpc_server_metrics.hh"
#include "metrics/labels.hh"
#include "metrics/process.hh"

namespace ic::metrics {

// Upper bounds (µs, inclusive) of inferencecache_lookup_route_latency_seconds.
// The docs/admin.md buckets 0.0001 .. 0.1 s plus finer 10/25/50 µs ones below them
// (docs/admin.md allows finer low buckets; a warm lookup takes a few µs). +Inf is
// implicit (the series' count).
inline constexpr std::array<std::int64_t, 13> kLatencyBucketsUs = {
    10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000};
inline constexpr std::size_t kLatencyBucketCount = kLatencyBucketsUs.size();

// One model's LookupRoute series: calls per (reason_code, hint_used) and the
// latency histogram.
struct LookupSeries {
  // calls[reason][hint_used ? 1 : 0]
  std::array<std::array<std::uint64_t, 2>, kReasonCount> calls{};
  // Non-cumulative bucket counts: buckets[i] counts latencies in
  // (kLatencyBucketsUs[i-1], kLatencyBucketsUs[i]]; over the last bound only
  // `count` sees them.
  std::array<std::uint64_t, kLatencyBucketCount> buckets{};
  std::uint64_t count = 0;   // observations (the +Inf bucket)
  std::uint64_t sum_us = 0;  // total latency, µs

  void merge(const LookupSeries& other);
};

// Per-core operator figures; one entry per core in Sample::cores.
struct CoreFigures {
  unsigned core = 0;                        // reactor index (label core="N")
  std::uint64_t lookups = 0;                // LookupRoute calls recorded on this core
  std::uint64_t cross_core_posts = 0;       // tasks this core posted to other cores
  std::uint64_t cross_core_post_drops = 0;  // posts refused by a full mailbox
  std::int64_t mailbox_depth = 0;           // tasks waiting in this core's inbound mailboxes
  std::int64_t index_entries = 0;           // (key, replica) entries held by this core's shard
  std::int64_t ring_setup_flags = 0;        // IORING_SETUP_* bitmask of this core's io_uring
};

// Everything one scrape shows. A core's copy (one Sample with one CoreFigures)
// and the merged result have the same shape; merge() sums counters and gauges
// and appends the core rows.
struct Sample {
  std::map<std::string, LookupSeries, std::less<>> lookups;            // by model
  std::map<std::string, std::int64_t, std::less<>> index_entries;      // by model
  std::map<std::string, std::uint64_t, std::less<>> tenant_evictions;  // by tenant_id
  // index_evictions[algorithm][reason]
  std::array<std::array<std::uint64_t, kEvictionReasonCount>, kEvictionAlgorithmCount>
      index_evictions{};
  // Stats of a new (tenant, model, replica) refused at the index's bounds
  // (index::Shard::stats_refused).
  std::uint64_t index_stats_refused = 0;
  // auth[endpoint][result]
  std::array<std::array<std::uint64_t, kAuthResultCount>, kAuthEndpointCount> auth{};
  std::uint64_t ingest_messages = 0;  // CacheStateUpdate messages ingested
  std::uint64_t ingest_entries = 0;   // (key, replica) upserts those messages made
  std::array<std::uint64_t, kEventTypeCount> events{};  // PublishEvent by type
  std::array<std::int64_t, kListenerCount> open_connections{};
  std::array<std::uint64_t, kListenerCount> accepted_connections{};
  std::int64_t open_streams = 0;    // HTTP/2 streams open on gRPC connections
  std::uint64_t http_requests = 0;  // admin HTTP requests answered
  // policy_reloads[source][ok ? 0 : 1]
  std::array<std::array<std::uint64_t, 2>, kPolicySourceCount> policy_reloads{};
  // prompt_text lookups that failed open, by PromptTextFailure
  std::array<std::uint64_t, kPromptTextFailureCount> prompt_text_failures{};
  std::vector<CoreFigures> cores;  // one row per core that answered, by core
  RpcSample rpc;                   // grpc_server_* per method
  // The counters of the registered CounterFamily's (metrics/group.hh), at
  // their CounterFamilyId positions.
  std::vector<std::uint64_t> counters;
  // The values of the registered CoreFamily's (metrics/group.hh), by
  // CoreFamilyId::index.
  std::vector<CoreFamilyCopy> families;

  // Adds `other` into this sample (counters and gauges summed per label set;
  // other.cores appended).
  void merge(const Sample& other);
};

// Process-wide values read once per scrape on the scraping core.
struct ProcessFigures {
  bool server_up = false;
  bool grpc_tls_enabled = false;
  std::int64_t resident_memory_bytes = 0;         // from /proc/self/statm
  double start_time_seconds = 0;                  // Unix time the process started serving
  buildinfo::BuildInfo build{};                   // build_info labels
  std::string_view reactor_backend = "io_uring";  // build_info's too: "io_uring" or "epoll"
  ProcessStats stats;                             // the standard process_* families
};

}  // namespace ic::metrics
