// Shard: construction, policy installation and the operator-facing
// aggregates; the other calls forward to the file named after them: ingest.cc,
// events.cc, cache_state.cc, expiry.cc (TTL), evict.cc, global_cap.cc,
// export.cc; record plumbing: records.cc. Shard::lookup is defined with the
// steps it runs, in lookup.cc (and ranking.cc).

#include "index/shard.hh"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <unordered_map>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {
// A seed no peer can predict, from the kernel (getrandom(2); it blocks only
// before the entropy pool is first initialized at boot). Should the kernel
// refuse, a mix of the clocks and an address: weaker, but no crash on a
// reactor that builds a shard (a placement copy's resync).
std::uint64_t random_key_seed() {
  std::uint64_t seed = 0;
  ssize_t got = -1;
  do {
    got = getrandom(&seed, sizeof seed, 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof seed)) {
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count() ^
                       std::chrono::system_clock::now().time_since_epoch().count();
    seed = fmix64(static_cast<std::uint64_t>(ticks) ^ reinterpret_cast<std::uintptr_t>(&seed));
  }
  return seed != 0 ? seed : 1;  // 0 means "draw one"
}
}  // namespace

Shard::Impl::Impl(IndexConfig c, IndexGlobals* g, std::shared_ptr<const config::PolicySet> p)
    : cfg(c),
      globals(g),
      policies(p ? std::move(p) : config::PolicySet::defaults()),
      key_seed(c.key_seed != 0 ? c.key_seed : random_key_seed()) {
  if (globals == nullptr) {
    own_globals = std::make_unique<IndexGlobals>();
    globals = own_globals.get();
  }
  const unsigned n = globals->shard_count.fetch_add(1, std::memory_order_relaxed);
  if (n < IndexGlobals::kMaxShards) slot = static_cast<int>(n);
  sha = EVP_MD_CTX_new();
  resolve_pd_pools();
}

Shard::Impl::~Impl() {
  EVP_MD_CTX_free(sha);
  // A shard that is gone holds no victim.
  if (slot >= 0) globals->oldest[slot].last_seen.store(INT64_MAX, std::memory_order_relaxed);
  // Leave the global count as if this shard's entries were gone.
  if (own_globals == nullptr)
    globals->total_entries.fetch_sub(entry_total - unpublished, std::memory_order_relaxed);
}

Shard::Shard(IndexConfig config, IndexGlobals* globals,
             std::shared_ptr<const config::PolicySet> policies)
    : impl_(std::make_unique<Impl>(config, globals, std::move(policies))) {}

Shard::~Shard() = default;

void Shard::set_policies(std::shared_ptr<const config::PolicySet> policies) {
  Impl& s = *impl_;
  s.policies = policies ? std::move(policies) : config::PolicySet::defaults();
  s.name_cache = NameCache{};  // its policy pointer points into the old set
  s.resolve_pd_pools();        // the topologies' pointers too
  // The controller re-pushes the same snapshot every 30 s: keep the victim
  // orders unless an eviction algorithm or a quota actually changed.
  bool order_changed = false;
  for (std::uint32_t t = 0; t < s.tenant_recs.size(); ++t) {
    TenantRec& rec = s.tenant_recs[t];
    if (rec.tms.empty()) continue;
    const bool lfu = rec.lfu;
    const std::int64_t quota = rec.quota;
    s.refresh_tenant_policy(t);
    order_changed = order_changed || lfu != rec.lfu;
    if (lfu != rec.lfu || quota != rec.quota) rec.drop_quota_victims();
  }
  if (order_changed) s.invalidate_victims();
}

const std::shared_ptr<const config::PolicySet>& Shard::policies() const { return impl_->policies; }

IngestResult Shard::ingest(const Update& update, std::int64_t now_wall_us) {
  return impl_->ingest(update, now_wall_us);
}

std::size_t Shard::apply_event(const Event& event, std::int64_t now_wall_us) {
  return impl_->apply_event(event, now_wall_us);
}

void Shard::get_cache_state(const CacheStateQuery& query, CacheState* out) const {
  impl_->get_cache_state(query, out);
}

void Shard::for_each_reporter(std::string_view tenant, std::string_view model,
                              std::size_t max_visits, const ReporterFn& fn) const {
  impl_->for_each_reporter(tenant, model, max_visits, fn);
}

void Shard::for_each_reporter_any_model(std::string_view tenant, std::size_t max_visits,
                                        const ReporterFn& fn) const {
  impl_->for_each_reporter_any_model(tenant, max_visits, fn);
}

bool Shard::sweep_slice(std::int64_t now_wall_us, std::size_t budget) {
  return impl_->sweep_slice(now_wall_us, budget);
}

std::int64_t Shard::entry_count() const noexcept { return impl_->entry_total; }
std::int64_t Shard::key_count() const noexcept { return impl_->key_total; }
const EvictionCounters& Shard::eviction_counters() const noexcept { return impl_->evictions; }
std::size_t Shard::stats_entry_count() const noexcept { return impl_->stats_total; }
std::uint64_t Shard::stats_refused() const noexcept { return impl_->stats_refused; }

void Shard::for_each_tenant_eviction(
    const std::function<void(std::string_view, std::uint64_t)>& fn) const {
  for (const auto& [tenant, n] : impl_->tenant_evictions) fn(tenant, n);
}

void Shard::for_each_model_keys(const std::function<void(std::string_view, std::int64_t)>& fn) {
  Impl& s = *impl_;
  for (const std::string& m : s.drained_models) {
    if (s.models.find(m) == kNone) fn(m, 0);
  }
  s.drained_models.clear();
  for (std::uint32_t m = 0; m < s.model_keys.size() && m < s.models.capacity(); ++m) {
    const std::string& name = s.models.name(m);
    if (s.models.find(name) == m) fn(name, s.model_keys[m]);
  }
}

void Shard::for_each_replica_hits(const std::function<void(const ReplicaHitRow&)>& fn) const {
  const Impl& s = *impl_;
  for (const TmRec& tm : s.tms) {
    if (!tm.live) continue;
    for (const StatsRec& st : tm.stats) {
      fn(ReplicaHitRow{.model = s.models.name(tm.model),
                       .replica = s.replicas.name(st.replica),
                       .engine_hit_tokens = st.prefix_cache_hit_tokens,
                       .engine_query_tokens = st.prefix_cache_query_tokens,
                       .engine_reported = true});
    }
  }
  for (const ScopeRec& sc : s.scopes) {
    if (!sc.live) continue;
    for (const ReplicaWork& w : sc.work.replicas) {
      fn(ReplicaHitRow{.model = s.models.name(s.tms[sc.tm].model),
                       .replica = s.replicas.name(w.replica),
                       .hints = w.hints,
                       .hinted_tokens = w.hinted_tokens,
                       .predicted_hit_tokens = w.predicted_hit_tokens});
    }
  }
}

ShardSnapshot Shard::collect_snapshot() const {
  const Impl& s = *impl_;
  ShardSnapshot snap;
  std::unordered_map<std::uint64_t, std::size_t> rows;  // tenant<<32|replica → row
  auto row_of = [&](std::uint32_t tenant, std::uint32_t replica) -> ReplicaRow& {
    const std::uint64_t id = (std::uint64_t{tenant} << 32) | replica;
    auto [it, fresh] = rows.emplace(id, snap.replicas.size());
    if (fresh) {
      ReplicaRow& r = snap.replicas.emplace_back();
      r.tenant = s.tenants.name(tenant);
      r.replica_id = s.replicas.name(replica);
    }
    return snap.replicas[it->second];
  };
  s.refresh_stale_newest();
  for (const auto& [id, tr] : s.tenant_replicas) {
    ReplicaRow& r = row_of(static_cast<std::uint32_t>(id >> 32), static_cast<std::uint32_t>(id));
    r.prefix_count = tr.entries;
    r.last_event_at_us = tr.newest;
  }
  std::vector<std::int64_t> stats_time(0);
  std::unordered_map<std::size_t, std::int64_t> reported;  // row → stats_reported used
  for (const TmRec& tm : s.tms) {
    if (!tm.live) continue;
    for (const StatsRec& st : tm.stats) {
      ReplicaRow& r = row_of(tm.tenant, st.replica);
      const std::size_t idx = static_cast<std::size_t>(&r - snap.replicas.data());
      r.last_update_us = std::max(r.last_update_us, st.last_seen);
      auto [it, first] = reported.emplace(idx, st.stats_reported);
      if (!first && st.stats_reported < it->second) continue;
      it->second = st.stats_reported;
      // The replica-level values come from its latest stats across models.
      r.stats_reported = true;
      r.cache_memory_bytes = st.cache_memory_bytes;
      r.hit_rate = st.hit_rate;
      r.pressure = st.pressure;
      r.t2_hit_tokens = st.t2_hit_tokens;
      r.t2_query_tokens = st.t2_query_tokens;
      r.prefix_cache_hit_tokens = st.prefix_cache_hit_tokens;
      r.prefix_cache_query_tokens = st.prefix_cache_query_tokens;
    }
  }
  std::unordered_map<std::string_view, std::size_t> tenant_rows;
  for (std::uint32_t t = 0; t < s.tenant_recs.size(); ++t) {
    const TenantRec& tr = s.tenant_recs[t];
    if (tr.tms.empty()) continue;
    TenantRow& row = snap.tenants.emplace_back();
    row.tenant_id = s.tenants.name(t);
    row.index_entries = tr.key_count;
    snap.total_prefixes += tr.key_count;
  }
  for (std::size_t i = 0; i < snap.tenants.size(); ++i) tenant_rows[snap.tenants[i].tenant_id] = i;
  std::vector<std::int64_t> with_stats(snap.tenants.size(), 0);
  for (const ReplicaRow& r : snap.replicas) {
    auto it = tenant_rows.find(r.tenant);
    if (it == tenant_rows.end() || !r.stats_reported) continue;
    TenantRow& row = snap.tenants[it->second];
    row.hit_rate_reported = true;
    row.hit_rate += r.hit_rate;
    row.memory_used += r.cache_memory_bytes;
    ++with_stats[it->second];
  }
  for (std::size_t i = 0; i < snap.tenants.size(); ++i) {
    if (with_stats[i] > 0) snap.tenants[i].hit_rate /= static_cast<double>(with_stats[i]);
  }
  for (const ScopeRec& sc : s.scopes) {
    if (!sc.live) continue;
    const TmRec& tm = s.tms[sc.tm];
    for (const ReplicaWork& w : sc.work.replicas) {
      WorkRow& row = snap.work.emplace_back();
      row.tenant = s.tenants.name(tm.tenant);
      row.model = s.models.name(tm.model);
      row.hash_scheme = s.schemes.name(sc.scheme);
      row.replica_id = s.replicas.name(w.replica);
      row.open_bookings = w.open;
      row.booked_tokens = w.open_tokens;
      row.prefill_tokens_per_s = w.rate;
      row.completion_us = static_cast<std::int64_t>(w.latency_us);
      row.hints = w.hints;
      row.hinted_tokens = w.hinted_tokens;
      row.predicted_hit_tokens = w.predicted_hit_tokens;
      for (const StatsRec& st : tm.stats) {
        if (st.replica != w.replica) continue;
        row.engine_hit_rate = st.hit_rate;
        row.engine_hit_rate_reported = true;
        row.engine_hit_tokens = st.prefix_cache_hit_tokens;
        row.engine_query_tokens = st.prefix_cache_query_tokens;
      }
      row.bookings_completed = w.completed;
      row.bookings_expired = w.expired;
    }
  }
  return snap;
}

std::size_t Shard::memory_bytes() const noexcept {
  const Impl& s = *impl_;
  std::size_t b = s.keys.memory_bytes() + s.spills.memory_bytes() + s.key_table.memory_bytes();
  b += s.tenants.memory_bytes() + s.models.memory_bytes() + s.schemes.memory_bytes() +
       s.adapters.memory_bytes() + s.replicas.memory_bytes();
  b += s.domains.capacity() * sizeof(DomainRec) + s.domain_ids.size() * 48;
  b += s.tms.capacity() * sizeof(TmRec) + s.tm_ids.size() * 32;
  b += s.scopes.capacity() * sizeof(ScopeRec) + s.scope_ids.size() * 32;
  for (const ScopeRec& sc : s.scopes) {
    b += sc.members.capacity() * sizeof(ScopeMember) + sc.loads.capacity() * sizeof(LoadRec);
    b += sc.work.replicas.capacity() * sizeof(ReplicaWork) +
         sc.work.bookings.capacity() * sizeof(Booking) +
         sc.work.heads.capacity() * sizeof(std::uint32_t);
    for (const Booking& bk : sc.work.bookings) b += bk.blocks.capacity() * sizeof(std::uint64_t);
  }
  b += s.work_cands.capacity() * sizeof(WorkCand) + s.work_keys.capacity() * sizeof(std::uint64_t) +
       s.booked_slots.capacity() * sizeof(std::uint32_t);
  b += s.replica_scratch.capacity() * sizeof(ReplicaScratch);
  for (const TmRec& tm : s.tms) b += tm.stats.capacity() * sizeof(StatsRec);
  b += s.tenant_recs.capacity() * sizeof(TenantRec) + s.tenant_replicas.size() * 48;
  for (const TenantRec& t : s.tenant_recs) b += t.tms.capacity() * sizeof(std::uint32_t);
  b += s.listed_ids * sizeof(std::uint32_t);
  b += s.victims.capacity() * sizeof(VictimRec) + s.group.capacity() * sizeof(VictimRec);
  b += s.long_hashes.capacity() * sizeof(std::string);
  return b;
}

}  // namespace ic::index
