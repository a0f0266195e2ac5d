// ReportCacheState ingest (docs/index.md "Ingest"): prefixes, then stats,
// then the tenant quota and the global cap.

#include <algorithm>
#include <cmath>
#include <limits>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// Stored tier of a reported CacheTier: UNSPECIFIED → T1, known as is, unknown
// or negative → invalid (coldest).
std::uint8_t stored_tier(int tier) {
  if (tier == 0) return 1;
  if (tier >= 1 && tier <= 3) return static_cast<std::uint8_t>(tier);
  return kTierInvalid;
}

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

// Pressure is (running + waiting) / a ceiling (docs/kvevents.md), so a
// replica's readings are multiples of one request's step: their common
// divisor. It counts requests once kStepReadings changed readings agree on it
// and it divides 1 (the ceiling is a whole number); a divisor below kMinStep
// means the replica's pressure is not a request count.
constexpr std::uint32_t kStepReadings = 4;
constexpr double kMinStep = 1.0 / 65536;
constexpr double kStepTolerance = 1e-6;

// The common divisor of a ≥ b > 0, within kStepTolerance (float readings).
double common_step(double a, double b) {
  while (b > kStepTolerance) {
    double r = std::fmod(a, b);
    if (b - r <= kStepTolerance) r = 0;
    a = b;
    b = r;
  }
  return a;
}

// Learns `rec`'s step from its new pressure: the requests that pressure
// counts, or -1 while unknown (no step yet, not a count, 0 or clamped at 1).
std::int64_t learn_step(StatsRec& rec) {
  const double p = rec.pressure;
  if (p <= 0 || p >= 1 || rec.pressure_step < 0) return -1;
  if (p != rec.last_step_reading) {
    rec.last_step_reading = p;
    ++rec.step_readings;
  }
  const double step = rec.pressure_step;
  rec.pressure_step = step == 0 ? p : common_step(std::max(step, p), std::min(step, p));
  if (rec.pressure_step < kMinStep) {
    rec.pressure_step = -1;
    return -1;
  }
  const double ceiling = 1.0 / rec.pressure_step;
  if (rec.step_readings < kStepReadings || std::abs(ceiling - std::round(ceiling)) > 0.01)
    return -1;
  return std::llround(p / rec.pressure_step);
}

std::int32_t saturate32(std::int64_t v) {
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(
      v, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()));
}

}  // namespace

void Shard::Impl::upsert(std::uint32_t domain, std::string_view bytes, std::uint64_t h,
                         std::int32_t tokens, std::int64_t seen, std::uint8_t tier,
                         std::uint32_t replica, IngestResult& r) {
  // One hash serves both the probe and, for a new key, its insertion.
  std::size_t hole = 0;
  std::uint32_t k = find_key_hashed(domain, h, bytes, &hole);
  const bool new_key = k == kNone;
  if (new_key) k = create_key(domain, bytes, h, hole);
  const std::uint32_t tenant = domains[domain].k.tenant;
  TenantRec& t = tenant_recs[tenant];
  if (t.quota_valid && seen <= t.quota_threshold) t.drop_quota_victims();
  // A new key holds no entry yet (most block entries of a new chain).
  std::uint32_t e = new_key ? kNone : find_entry(k, replica);
  bool changed = false;
  if (e == kNone) {
    e = create_entry(k, replica);
    tenant_replica_add(tenant, replica, seen);
    changed = true;
    ++ingest_new_entries;
  }
  EntryFields& er = entry(e);
  er.token_count = tokens;
  er.tier = tier;  // last write wins: T1 → T2 → T1
  if (changed || er.last_seen != seen) {
    if (!changed) tenant_replica_seen(tenant, replica, er.last_seen, seen);
    er.last_seen = seen;
    on_order_change(e);
  }
  ++r.entries_upserted;
  if (sink != nullptr) report_upsert(e);
}

std::optional<std::int64_t> Shard::Impl::apply_stats(std::uint32_t tm, std::uint32_t replica_ref,
                                                     const ReplicaStats& s, std::int64_t seen) {
  auto& v = tms[tm].stats;
  StatsRec* rec = nullptr;
  for (StatsRec& x : v) {
    if (x.replica == replica_ref) rec = &x;
  }
  if (rec == nullptr) {
    // Bounded: a peer inventing replica ids would otherwise grow this list
    // (and the scan above, on every update) without end.
    if (v.size() >= cfg.max_stats_per_model || stats_total >= cfg.max_stats_entries) {
      ++stats_refused;
      return std::nullopt;
    }
    replicas.ref(replica_ref);
    rec = &v.emplace_back();
    rec->replica = replica_ref;
    ++stats_total;
  }
  rec->cache_memory_bytes = s.cache_memory_bytes;
  rec->hit_rate = finite_or_zero(s.hit_rate);
  rec->pressure = finite_or_zero(s.pressure);
  rec->t2_hit_tokens = s.t2_hit_tokens;
  rec->t2_query_tokens = s.t2_query_tokens;
  rec->prefix_cache_hit_tokens = s.prefix_cache_hit_tokens;
  rec->prefix_cache_query_tokens = s.prefix_cache_query_tokens;
  rec->last_seen = seen;
  rec->stats_reported = seen;
  if (sink != nullptr) report_replica(ChangeType::kReplicaUpdated, tm, replica_ref, seen);
  return learn_step(*rec);
}

std::uint32_t Shard::Impl::ingest_stats(const Update& u, std::uint32_t replica, std::int64_t seen,
                                        std::int64_t now) {
  std::uint32_t tm = find_tm(tenants.find(u.tenant_id), models.find(u.model_id));
  // No (tenant, model) record for stats the shard has no room for: it would
  // intern their names for nothing (a model's name outlives it until the next
  // /metrics scrape, which reports it drained).
  if (tm == kNone && stats_total >= cfg.max_stats_entries) {
    ++stats_refused;
    return kNone;
  }
  if (tm == kNone) {
    const std::uint32_t t = tenants.acquire(u.tenant_id);
    const std::uint32_t m = models.acquire(u.model_id);
    tm = get_or_create_tm(t, m);
    tenants.release(t);
    models.release(m);
  }
  const std::optional<std::int64_t> requests = apply_stats(tm, replica, *u.stats, seen);
  // Stats name the scope by the update's hash scheme (the KV-event adapter
  // sends its own): one lookup, only for an idle replica or one whose
  // pressure counts its requests. An idle report ends the replica's bookings
  // whether or not its stats could be held. A decode-only replica of a P/D
  // topology counts the decodes it runs, not requests waiting for prefill
  // (docs/pd-routing.md "Decode load"): its count neither displaces its
  // prefill bookings nor floors its queue, and a floor from before it joined
  // the pool ends.
  if (u.stats->pressure == 0) {
    settle_idle(find_scope(tm, schemes.find(u.hash_scheme)), replica, std::min(seen, now), now);
  } else if (requests && *requests > 0 && decode_only(replica)) {
    clear_unbooked(find_scope(tm, schemes.find(u.hash_scheme)), replica, now);
  } else if (requests && *requests > 0) {
    settle_count(find_scope(tm, schemes.find(u.hash_scheme)), replica, *requests,
                 std::min(seen, now), now);
  }
  if (requests) return tms[tm].tenant;
  maybe_remove_tm(tm);  // made for these stats alone: nothing holds it
  return tms[tm].live ? tms[tm].tenant : kNone;
}

void Shard::Impl::ingest_prefix(std::uint32_t domain, const PrefixReport& p, std::int64_t seen,
                                std::uint32_t replica, IngestResult& r) {
  const std::uint8_t tier = stored_tier(p.tier);
  const std::uint32_t tm = domains[domain].tm;
  // Work-aware bookings this report completes (bookings.cc), when the scope has any.
  WorkState& ws = scopes[domains[domain].scope].work;
  if (p.block_hashes.empty()) {
    const std::uint64_t h = group_hash(tm, p.prefix_hash);
    upsert(domain, p.prefix_hash, h, p.token_count, seen, tier, replica, r);
    if (ws.live > 0) note_stored_key(ws, replica, h, ingest_now);
    return;
  }
  // The blocks' slots and key records are independent random reads: block j
  // starts the slot read of block j + kSlotAhead and the key record reads of
  // block j + kKeyAhead (its slot has landed by then), so the misses overlap.
  // A new key's probe reads every key of its run: the first kRunAhead of them.
  constexpr std::size_t kSlotAhead = 16, kKeyAhead = 8;
  constexpr int kRunAhead = 8;
  const std::size_t n = p.block_hashes.size();
  chain_keys.resize(n);
  const GroupHasher hash_block = group_hasher(tm);
  for (std::size_t j = 0; j < n; ++j) chain_keys[j] = hash_block(p.block_hashes[j]);
  for (std::size_t j = 0; j < std::min(n, kSlotAhead); ++j) prefetch_slot(chain_keys[j]);
  for (std::size_t j = 0; j < std::min(n, kKeyAhead); ++j) prefetch_key(chain_keys[j], kRunAhead);
  std::int64_t sum = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (j + kSlotAhead < n) prefetch_slot(chain_keys[j + kSlotAhead]);
    if (j + kKeyAhead < n) prefetch_key(chain_keys[j + kKeyAhead], kRunAhead);
    sum += p.block_token_counts[j];
    upsert(domain, p.block_hashes[j], chain_keys[j], saturate32(sum), seen, tier, replica, r);
  }
  if (ws.live > 0) note_stored_chain(ws, replica, std::span(chain_keys.data(), n), ingest_now);
  if (!p.prefix_hash.empty()) {
    const std::uint64_t h = group_hash(tm, p.prefix_hash);
    upsert(domain, p.prefix_hash, h, saturate32(sum), seen, tier, replica, r);
    if (ws.live > 0) note_stored_key(ws, replica, h, ingest_now);
  }
}

void Shard::Impl::settle_ingest(std::uint32_t tenant, IngestResult& r) {
  if (tenant != kNone && !tenant_recs[tenant].tms.empty()) r.evicted_quota = enforce_quota(tenant);
  const std::int64_t total = publish();
  if (total > cfg.max_entries) {
    r.evicted_cap = settle_cap(total, r.cap_handoff);
  } else {
    note_oldest(total);
  }
}

IngestResult Shard::Impl::ingest(const Update& u, std::int64_t now) {
  IngestResult r;
  if (u.tenant_id == config::kReservedTenant) {
    r.dropped_reserved = true;
    return r;
  }
  const std::int64_t seen = u.timestamp_us == 0 ? now : u.timestamp_us;
  // A temporary reference keeps the replica id alive while entries are added.
  const std::uint32_t replica = replicas.acquire(u.replica_id);
  std::uint32_t tenant = kNone;
  std::uint32_t domain = kNone;
  ingest_new_entries = 0;
  ingest_now = now;
  if (u.hash_scheme.empty()) {
    r.prefixes_dropped = static_cast<std::uint32_t>(u.prefixes.size());
  } else {
    std::string_view domain_adapter;
    for (const PrefixReport& p : u.prefixes) {
      const bool chain = !p.block_hashes.empty() || !p.block_token_counts.empty();
      if (chain && p.block_hashes.size() != p.block_token_counts.size()) {
        ++r.prefixes_dropped;  // malformed: never fall back to prefix_hash
        continue;
      }
      const std::string_view adapter = !p.adapter_id.empty() ? p.adapter_id : u.adapter_id;
      if (domain == kNone || adapter != domain_adapter) {
        domain = get_or_create_domain(u.tenant_id, u.model_id, u.hash_scheme, adapter);
        domain_adapter = adapter;
        tenant = domains[domain].k.tenant;
      }
      // A new domain may be dropped again only by removals: keep `domain` valid.
      ingest_prefix(domain, p, seen, replica, r);
    }
  }
  // One update is one scope: settle the bookings it completed (docs/ranking.md).
  if (domain != kNone) settle_stored(domains[domain].scope, replica, now, ingest_new_entries > 0);
  if (u.stats) {
    const std::uint32_t stats_tenant = ingest_stats(u, replica, seen, now);
    if (tenant == kNone) tenant = stats_tenant;
  }
  replicas.release(replica);
  settle_ingest(tenant, r);
  return r;
}

}  // namespace ic::index
