#pragma once
// Predicted vs delivered per (model, replica) (docs/ranking.md "Predicted vs
// delivered", docs/admin.md): inferencecache_replica_hints_total,
// _hinted_prompt_tokens_total, _predicted_hit_tokens_total and the engine's
// own _engine_prefix_cache_{hit,query}_tokens_total{model, replica_id}. The
// index shards keep the figures (index::Shard::for_each_replica_hits); this
// room, which sees every core's shard, owns the families and registers them
// with the metrics Registry (metrics/group.hh CoreFamily: rows rebuilt by
// every scrape, merged by a rule of their own).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "index/shard.hh"
#include "metrics/core_metrics.hh"
#include "metrics/exposition.hh"
#include "metrics/registry.hh"

namespace ic::sharding {

// One (model, replica)'s figures: what the work-aware hints naming it
// predicted, summed over tenants, beside the engine's own prefix-cache
// counters as its adapter last reported them (one engine: the largest report).
struct ReplicaHitFigures {
  std::uint64_t hints = 0;                 // answers naming the replica on top
  std::uint64_t hinted_tokens = 0;         // Σ their prompt tokens
  std::uint64_t predicted_hit_tokens = 0;  // Σ the hit tokens they predicted
  std::int64_t engine_hit_tokens = 0;      // ReplicaStats.prefix_cache_hit_tokens, cumulative
  std::int64_t engine_query_tokens = 0;    // ReplicaStats.prefix_cache_query_tokens, cumulative
  bool engine_reported = false;            // a ReplicaStats of the replica is held

  // Sums the hint counters; the engine's counters are one engine's, reported
  // under several tenants and read on several cores: the largest stands.
  void merge(const ReplicaHitFigures& other);
};

// One core's rows by (model, replica_id), rebuilt by every scrape (a
// forgotten replica leaves the families); past metrics::kMaxDynamicSeries
// pairs the rest fold into (kOverflowLabel, kOverflowLabel).
struct ReplicaHits {
  std::map<std::pair<std::string, std::string>, ReplicaHitFigures> rows;

  // Merges one (tenant, model, replica) row into its (model, replica) row.
  void add(std::string_view model, std::string_view replica, const ReplicaHitFigures& figures);
  // Drops every row (before the collectors refill them).
  void begin_collect() { rows.clear(); }
  // Merges another core's rows, pair by pair, as ReplicaHitFigures::merge says.
  void merge(const ReplicaHits& other);
  // The five families; nothing at all while no replica has a row; the
  // engine's families only for replicas that reported them.
  void render(metrics::Writer& w) const;
};

// Registers the families with `registry`; once, before the runtime starts.
void register_replica_hit_metrics(metrics::Registry& registry);

// Adds one row to `core`'s families, in a collector on that core; nothing
// before register_replica_hit_metrics ran.
void add_replica_hits(metrics::CoreMetrics& core, std::string_view model, std::string_view replica,
                      const ReplicaHitFigures& figures);
// Adds every row of `shard` (index::Shard::for_each_replica_hits) to `core`'s
// families; the shard's owning core, in a collector.
void add_replica_hits(metrics::CoreMetrics& core, const index::Shard& shard);

}  // namespace ic::sharding
