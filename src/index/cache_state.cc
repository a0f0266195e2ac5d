// GetCacheState (docs/index.md "GetCacheState"): the key count of (tenant,
// model) and its replicas' stats, sorted by replica_id; the endpoint
// picker's bounded view of the same replicas.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

StatsView Shard::Impl::stats_view(const TmRec& tm, const StatsRec& r) const {
  StatsView v;
  v.tenant = tenants.name(tm.tenant);
  v.model = models.name(tm.model);
  v.replica = replicas.name(r.replica);
  v.cache_memory_bytes = r.cache_memory_bytes;
  v.hit_rate = r.hit_rate;
  v.pressure = r.pressure;
  v.t2_hit_tokens = r.t2_hit_tokens;
  v.t2_query_tokens = r.t2_query_tokens;
  v.prefix_cache_hit_tokens = r.prefix_cache_hit_tokens;
  v.prefix_cache_query_tokens = r.prefix_cache_query_tokens;
  v.stats_reported_us = r.stats_reported;
  v.last_seen_us = r.last_seen;
  return v;
}

void Shard::Impl::get_cache_state(const CacheStateQuery& q, CacheState* out) const {
  out->total_prefixes = 0;
  out->hot_prefixes = 0;
  out->replicas.clear();
  if (q.tenant_id == config::kReservedTenant) return;
  const std::uint32_t tm = find_tm(tenants.find(q.tenant_id), models.find(q.model_id));
  if (tm == kNone) return;
  const TmRec& r = tms[tm];
  out->total_prefixes = r.key_count;
  for (const StatsRec& st : r.stats) out->replicas.push_back(stats_view(r, st));
  std::sort(out->replicas.begin(), out->replicas.end(),
            [](const StatsView& a, const StatsView& b) { return a.replica < b.replica; });
}

bool Shard::Impl::visit_reporters(const TmRec& tm, std::size_t* budget,
                                  const Shard::ReporterFn& fn) const {
  for (const StatsRec& st : tm.stats) {
    if (*budget == 0) return false;
    --*budget;
    if (!fn(replicas.name(st.replica), st.pressure)) return false;
  }
  return true;
}

void Shard::Impl::for_each_reporter(std::string_view tenant, std::string_view model,
                                    std::size_t max_visits, const Shard::ReporterFn& fn) const {
  if (tenant == config::kReservedTenant) return;
  const std::uint32_t tm = find_tm(tenants.find(tenant), models.find(model));
  if (tm != kNone) visit_reporters(tms[tm], &max_visits, fn);
}

void Shard::Impl::for_each_reporter_any_model(std::string_view tenant, std::size_t max_visits,
                                              const Shard::ReporterFn& fn) const {
  const std::uint32_t t = tenants.find(tenant);
  if (tenant == config::kReservedTenant || t == kNone || t >= tenant_recs.size()) return;
  // Each model visited costs one visit too: a tenant's models without stats
  // (entries only) are as many as a peer sends.
  for (const std::uint32_t tm : tenant_recs[t].tms) {
    if (max_visits == 0) return;
    --max_visits;
    if (!visit_reporters(tms[tm], &max_visits, fn)) return;
  }
}

}  // namespace ic::index
