#pragma once
// One Prometheus scrape across all cores (docs/admin.md "Metrics"): each core
// copies its CoreMetrics on its own thread, the calling core merges the copies
// and renders text format 0.0.4. Never blocks a reactor.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "metrics/registry.hh"
#include "runtime/runtime.hh"

namespace ic::metrics {

// Precondition: called on a reactor thread of `rt`; `registry` has one
// CoreMetrics per core of `rt` and outlives the scrape. `done(body)` runs once
// on the calling core with the rendered exposition, or with std::nullopt when
// a core did not answer within the map_reduce deadline (runtime/map_reduce.hh): a scrape that left
// a core's counters out would look like a counter reset to Prometheus, so the caller fails the
// scrape instead (503).
void scrape(runtime::Runtime& rt, Registry& registry,
            std::function<void(std::optional<std::string> body)> done);

// Merges core copies (missing ones skipped) into one Sample, cores in order.
Sample merge_samples(const std::vector<std::optional<Sample>>& copies);

}  // namespace ic::metrics
