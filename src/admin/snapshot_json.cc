#include "admin/snapshot_json.hh"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "config/policy.hh"

namespace ic::admin {

namespace {

// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
// (H. Hinnant, "chrono-compatible low-level date algorithms").
void civil_from_days(std::int64_t z, std::int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
}

// A float-typed wire value (ReplicaStats hit_rate/pressure) as the double
// with the float's shortest decimal spelling, so JSON shows 0.1, not
// 0.10000000149011612.
double float_precision(double value) {
  const auto f = static_cast<float>(value);
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  double out = 0;
  std::from_chars(buf, end, out);
  return out;
}

// A rate as JSON the way Go's encoding/json prints a float: an integral
// value has no fraction ("0", "1"), others the shortest spelling.
nlohmann::ordered_json rate_json(double value) {
  const double v = float_precision(value);
  if (v == 0 || v == 1) return static_cast<std::int64_t>(v);
  return v;
}

}  // namespace

std::string format_rfc3339_nano(std::int64_t wall_us) {
  if (wall_us == 0) return "0001-01-01T00:00:00Z";
  constexpr std::int64_t kUsPerDay = 86'400'000'000;
  std::int64_t days = wall_us / kUsPerDay;
  std::int64_t rem = wall_us % kUsPerDay;
  if (rem < 0) {
    rem += kUsPerDay;
    --days;
  }
  std::int64_t year = 0;
  unsigned month = 0;
  unsigned day = 0;
  civil_from_days(days, year, month, day);
  const std::int64_t secs = rem / 1'000'000;
  auto micros = static_cast<unsigned>(rem % 1'000'000);
  char buf[64];
  int n =
      std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                    static_cast<long long>(year), month, day, static_cast<long long>(secs / 3600),
                    static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  std::string out(buf, static_cast<std::size_t>(n));
  if (micros != 0) {
    int digits = 6;
    while (micros % 10 == 0) {
      micros /= 10;
      --digits;
    }
    n = std::snprintf(buf, sizeof buf, ".%0*u", digits, micros);
    out.append(buf, static_cast<std::size_t>(n));
  }
  out += 'Z';
  return out;
}

index::ShardSnapshot merge_snapshots(std::vector<std::optional<index::ShardSnapshot>>& shards) {
  index::ShardSnapshot merged;
  for (auto& shard : shards) {
    if (!shard) continue;
    for (auto& row : shard->replicas) {
      if (row.tenant != config::kReservedTenant) merged.replicas.push_back(std::move(row));
    }
    for (auto& row : shard->tenants) {
      if (row.tenant_id == config::kReservedTenant) continue;
      merged.total_prefixes += row.index_entries;
      merged.tenants.push_back(std::move(row));
    }
    merged.hot_prefixes += shard->hot_prefixes;
    for (auto& row : shard->work) merged.work.push_back(std::move(row));
  }
  std::sort(merged.work.begin(), merged.work.end(), [](const auto& a, const auto& b) {
    return std::tie(a.tenant, a.model, a.hash_scheme, a.replica_id) <
           std::tie(b.tenant, b.model, b.hash_scheme, b.replica_id);
  });
  std::sort(merged.replicas.begin(), merged.replicas.end(), [](const auto& a, const auto& b) {
    return std::tie(a.tenant, a.replica_id) < std::tie(b.tenant, b.replica_id);
  });
  std::sort(merged.tenants.begin(), merged.tenants.end(),
            [](const auto& a, const auto& b) { return a.tenant_id < b.tenant_id; });
  return merged;
}

std::string render_snapshot_json(const index::ShardSnapshot& merged) {
  using Json = nlohmann::ordered_json;
  Json replicas = Json::array();
  for (const auto& r : merged.replicas) {
    replicas.push_back(Json{
        {"replicaId", r.replica_id},
        {"tenant", r.tenant},
        {"cacheMemoryBytes", r.cache_memory_bytes},
        {"hitRate", rate_json(r.hit_rate)},
        {"pressure", rate_json(r.pressure)},
        {"lastUpdate", format_rfc3339_nano(r.last_update_us)},
        {"prefixCount", r.prefix_count},
        {"lastEventAt", format_rfc3339_nano(r.last_event_at_us)},
        {"statsReported", r.stats_reported},
        {"t2HitTokens", r.t2_hit_tokens},
        {"t2QueryTokens", r.t2_query_tokens},
        {"prefixCacheHitTokens", r.prefix_cache_hit_tokens},
        {"prefixCacheQueryTokens", r.prefix_cache_query_tokens},
    });
  }
  Json tenants = Json::array();
  for (const auto& t : merged.tenants) {
    tenants.push_back(Json{
        {"tenantId", t.tenant_id},
        {"indexEntries", t.index_entries},
        {"hitRate", rate_json(t.hit_rate)},
        {"hitRateReported", t.hit_rate_reported},
        {"memoryUsed", t.memory_used},
    });
  }
  // The work-aware ranking's soft state (docs/ranking.md "Predicted vs delivered").
  Json routing = Json::array();
  for (const auto& w : merged.work) {
    const double predicted = w.hinted_tokens > 0 ? static_cast<double>(w.predicted_hit_tokens) /
                                                       static_cast<double>(w.hinted_tokens)
                                                 : 0.0;
    routing.push_back(Json{
        {"tenant", w.tenant},
        {"modelId", w.model},
        {"hashScheme", w.hash_scheme},
        {"replicaId", w.replica_id},
        {"hints", w.hints},
        {"hintedPromptTokens", w.hinted_tokens},
        {"predictedHitTokens", w.predicted_hit_tokens},
        {"predictedHitRate", rate_json(predicted)},
        {"engineHitRate", rate_json(w.engine_hit_rate)},
        {"engineHitRateReported", w.engine_hit_rate_reported},
        {"engineHitTokens", w.engine_hit_tokens},
        {"engineQueryTokens", w.engine_query_tokens},
        {"openBookings", w.open_bookings},
        {"bookedTokens", w.booked_tokens},
        {"prefillTokensPerSecond", std::llround(w.prefill_tokens_per_s)},
        {"completionMicros", w.completion_us},
        {"bookingsCompleted", w.bookings_completed},
        {"bookingsExpired", w.bookings_expired},
    });
  }
  const Json doc{{"replicas", std::move(replicas)},
                 {"tenants", std::move(tenants)},
                 {"totalPrefixes", merged.total_prefixes},
                 {"hotPrefixes", merged.hot_prefixes},
                 {"routing", std::move(routing)}};
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace ic::admin
