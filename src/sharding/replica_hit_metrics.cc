#include "sharding/replica_hit_metrics.hh"

#include <algorithm>

namespace ic::sharding {

namespace {
// Written once before the reactors start (their threads' start orders it
// before every read); default: unregistered, counts nothing.
metrics::CoreFamilyId<ReplicaHits> g_replica_hits;
}  // namespace

void ReplicaHitFigures::merge(const ReplicaHitFigures& other) {
  hints += other.hints;
  hinted_tokens += other.hinted_tokens;
  predicted_hit_tokens += other.predicted_hit_tokens;
  engine_hit_tokens = std::max(engine_hit_tokens, other.engine_hit_tokens);
  engine_query_tokens = std::max(engine_query_tokens, other.engine_query_tokens);
  engine_reported = engine_reported || other.engine_reported;
}

void ReplicaHits::add(std::string_view model, std::string_view replica,
                      const ReplicaHitFigures& figures) {
  std::pair<std::string, std::string> key{std::string(model), std::string(replica)};
  if (rows.size() + 1 >= metrics::kMaxDynamicSeries && !rows.contains(key)) {
    key = {std::string(metrics::kOverflowLabel), std::string(metrics::kOverflowLabel)};
  }
  rows[std::move(key)].merge(figures);
}

void ReplicaHits::merge(const ReplicaHits& other) {
  for (const auto& [key, figures] : other.rows) rows[key].merge(figures);
}

void ReplicaHits::render(metrics::Writer& w) const {
  if (rows.empty()) return;
  struct Row {
    std::string_view name, help;
    bool engine;  // the engine's counters: only for a replica that reported them
    std::int64_t (*value)(const ReplicaHitFigures&);
  };
  static constexpr Row kRows[] = {
      {"replica_hints_total", "Work-aware LookupRoute answers naming the replica on top.", false,
       [](const ReplicaHitFigures& f) { return static_cast<std::int64_t>(f.hints); }},
      {"replica_hinted_prompt_tokens_total", "Prompt tokens of those answers.", false,
       [](const ReplicaHitFigures& f) { return static_cast<std::int64_t>(f.hinted_tokens); }},
      {"replica_predicted_hit_tokens_total",
       "Prompt tokens those answers predicted the replica holds (stored or booked).", false,
       [](const ReplicaHitFigures& f) {
         return static_cast<std::int64_t>(f.predicted_hit_tokens);
       }},
      {"replica_engine_prefix_cache_hit_tokens_total",
       "The engine's own prefix-cache hit tokens as its adapter last reported them (all its "
       "traffic).",
       true, [](const ReplicaHitFigures& f) { return f.engine_hit_tokens; }},
      {"replica_engine_prefix_cache_query_tokens_total",
       "The engine's own prefix-cache query tokens as its adapter last reported them.", true,
       [](const ReplicaHitFigures& f) { return f.engine_query_tokens; }},
  };
  for (const Row& row : kRows) {
    w.family(row.name, "counter", row.help);
    for (const auto& [key, figures] : rows) {
      if (row.engine && !figures.engine_reported) continue;
      w.sample(row.name, {{"model", key.first}, {"replica_id", key.second}}, row.value(figures));
    }
  }
}

void register_replica_hit_metrics(metrics::Registry& registry) {
  g_replica_hits = registry.add_core_family<ReplicaHits>(metrics::RenderAfter::kIndexEvictions);
}

void add_replica_hits(metrics::CoreMetrics& core, std::string_view model, std::string_view replica,
                      const ReplicaHitFigures& figures) {
  if (ReplicaHits* hits = core.family(g_replica_hits)) hits->add(model, replica, figures);
}

void add_replica_hits(metrics::CoreMetrics& core, const index::Shard& shard) {
  ReplicaHits* hits = core.family(g_replica_hits);
  if (hits == nullptr) return;
  shard.for_each_replica_hits([hits](const index::ReplicaHitRow& row) {
    hits->add(row.model, row.replica,
              ReplicaHitFigures{.hints = row.hints,
                                .hinted_tokens = row.hinted_tokens,
                                .predicted_hit_tokens = row.predicted_hit_tokens,
                                .engine_hit_tokens = row.engine_hit_tokens,
                                .engine_query_tokens = row.engine_query_tokens,
                                .engine_reported = row.engine_reported});
  });
}

}  // namespace ic::sharding
