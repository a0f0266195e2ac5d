#pragma once
// StreamMetrics (docs/streams.md "StreamMetrics"): the /metrics exposition as
// Metric messages, one sample at once and then one every interval.
//
// Each sample is the same scrape /metrics serves (metrics::scrape across every
// core, rendered in the Prometheus text format), read back series by series,
// so the stream always carries exactly what /metrics shows. A sample is one
// Metric per series, all with the same timestamp_us; a histogram's series are
// its `_bucket` (label `le`), `_sum` and `_count` with type "histogram".
// `names` keeps a series when it equals its name or its family's name (a
// histogram's name selects all its series). A sample a core did not answer in
// time is skipped, as /metrics answers 503 then. A client that leaves more
// than MetricStreamLimits::max_unsent_bytes unread is ended with
// RESOURCE_EXHAUSTED (its unsent bytes freed at once), and at most
// max_subscriptions calls are open per server.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "rpc/call.hh"
#include "rpc/timers.hh"

namespace ic::service {

// Renders one /metrics exposition asynchronously; `done` runs once on the
// calling core with the text, or std::nullopt when a core did not answer.
using ScrapeFn =
    std::function<void(std::function<void(std::optional<std::string> exposition)> done)>;

// Default interval between samples (µs) when the server is not told otherwise
// (StreamMetricsRequest has no interval field).
inline constexpr std::int64_t kDefaultMetricStreamIntervalUs = 10'000'000;
// Response bytes a StreamMetrics client may leave unread before its stream
// ends with RESOURCE_EXHAUSTED.
inline constexpr std::size_t kMetricStreamMaxUnsentBytes = 1024 * 1024;

// Subscriber bounds of StreamMetrics (docs/streams.md "StreamMetrics"). One
// subscriber holds at most max_unsent_bytes plus one sample of server memory
// (and costs one scrape per interval); the server at most max_subscriptions
// of those.
struct MetricStreamLimits {
  // Response bytes the client has not taken (bytes); past it the stream ends
  // with RESOURCE_EXHAUSTED and its unsent bytes are freed.
  std::size_t max_unsent_bytes = kMetricStreamMaxUnsentBytes;
  // Open StreamMetrics calls per server; one more ends at once with
  // RESOURCE_EXHAUSTED.
  std::size_t max_subscriptions = 128;
};

// The open StreamMetrics calls of one server, counted across its cores
// (thread-safe; outlives the cores' method tables).
class MetricSubscribers {
 public:
  explicit MetricSubscribers(MetricStreamLimits limits = {}) : limits_(limits) {}
  // Takes a slot; false (nothing taken) when max_subscriptions are open.
  bool try_add() {
    if (active_.fetch_add(1, std::memory_order_relaxed) < limits_.max_subscriptions) return true;
    active_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  // Gives a slot taken by try_add() back.
  void remove() { active_.fetch_sub(1, std::memory_order_relaxed); }
  std::size_t active() const { return active_.load(std::memory_order_relaxed); }
  const MetricStreamLimits& limits() const { return limits_; }

 private:
  MetricStreamLimits limits_;
  std::atomic<std::size_t> active_{0};
};

// Parses a Prometheus text-format 0.0.4 exposition into Metric messages
// stamped `timestamp_us`, keeping the series `names` selects (empty = all).
// Lines that do not parse are skipped (the input is our own renderer's).
std::vector<::inferencecache::v1alpha1::Metric> parse_exposition(
    std::string_view text, const std::set<std::string, std::less<>>& names,
    std::int64_t timestamp_us);

// Registers /inferencecache.v1alpha1.InferenceCache/StreamMetrics: a sample
// from `scrape` now and every `interval_us` (> 0) on `timers` (this core's;
// outlives `methods`), for at most the subscribers `subscribers` admits
// (shared by every core; outlives `methods`).
void add_metric_stream(rpc::MethodTable& methods, ScrapeFn scrape, std::int64_t interval_us,
                       rpc::Timers& timers, MetricSubscribers& subscribers);

}  // namespace ic::service
