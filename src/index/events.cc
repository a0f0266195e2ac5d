// PublishEvent (docs/index.md "Events"): PREFIX_EVICTED probes one group,
// REPLICA_UPDATED refreshes liveness, ALL_CLEARED walks the tenant's keys;
// PREFIX_ADDED and unknown types are acknowledged no-ops. PREFIX_EVICTED and
// ALL_CLEARED also free LookupPDRoute's decode slots (decode_bookings.cc).

#include "base/check.hh"
#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

std::size_t Shard::Impl::evict_prefix(const Event& ev, std::uint32_t tm, std::uint32_t replica) {
  const std::string_view bytes = ev.prefix_hash;
  const std::uint32_t adapter = ev.adapter_id.empty() ? kNone : adapters.find(ev.adapter_id);
  if (!ev.adapter_id.empty() && adapter == kNone) return 0;
  // The group's keys share one probe run; collect them first (removing a
  // key's last entry removes the key and shifts the run).
  event_keys.clear();
  key_table.for_each_in_run(group_hash(tm, bytes), [&](std::uint32_t k) {
    const KeyRec& kr = keys[k];
    const DomainRec& dr = domains[kr.domain];
    if (dr.tm == tm && key_bytes_equal(kr, bytes) && (adapter == kNone || dr.k.adapter == adapter))
      event_keys.push_back(k);
  });
  std::size_t removed = 0;
  for (const std::uint32_t k : event_keys) {
    const std::uint32_t e = find_entry(k, replica);
    if (e != kNone) {
      remove_entry(e);
      ++removed;
    }
  }
  return removed;
}

void Shard::Impl::refresh_replica(const Event& ev, std::uint32_t tm, std::uint32_t replica,
                                  std::int64_t now) {
  const std::int64_t seen = ev.timestamp_us == 0 ? now : ev.timestamp_us;
  for (StatsRec& s : tms[tm].stats) {
    if (s.replica != replica) continue;
    s.last_seen = seen;
    if (sink != nullptr) report_replica(ChangeType::kReplicaUpdated, tm, replica, seen);
  }
}

std::size_t Shard::Impl::clear_replica(const Event& ev, std::uint32_t tenant, std::uint32_t model,
                                       std::uint32_t replica) {
  // The tenant's keys (its list, or one pass over the shard's key slots,
  // docs/index.md "Layout and memory"), then this model's. Nothing to walk
  // when the replica holds no entry of the tenant (a repeated ALL_CLEARED);
  // the walk stops once it removed all the tenant's entries of the replica.
  std::size_t removed = 0;
  const TenantReplicaRec* held = find_tenant_replica((std::uint64_t{tenant} << 32) | replica);
  const std::int64_t held_entries = held == nullptr ? 0 : held->entries;
  if (held_entries > 0) collect_tenant_keys(tenant);
  quiet_removals = true;  // one ALL_CLEARED report, not one per entry
  for (std::size_t i = 0; held_entries > 0 && i < tenant_keys.size(); ++i) {
    const std::uint32_t k = tenant_keys[i];
    if (domains[keys[k].domain].k.model != model) continue;
    const std::uint32_t e = find_entry(k, replica);
    if (e == kNone) continue;
    remove_entry(e);
    if (static_cast<std::int64_t>(++removed) == held_entries) break;
  }
  quiet_removals = false;
  // tm may have been freed if it had no stats; look it up again.
  bool cleared = false;
  const std::uint32_t tm = find_tm(tenants.find(ev.tenant_id), models.find(ev.model_id));
  if (tm != kNone) {
    auto& v = tms[tm].stats;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->replica != replica) continue;
      v.erase(it);
      IC_CHECK(stats_total > 0, "the stats entry count covers every entry");
      --stats_total;
      cleared = true;
      replicas.release(replica);
      maybe_remove_tm(tm);
      break;
    }
  }
  if (sink != nullptr && (cleared || removed > 0)) report_cleared(ev);
  return removed;
}

std::size_t Shard::Impl::apply_event(const Event& ev, std::int64_t now) {
  if (ev.tenant_id == config::kReservedTenant) return 0;
  const std::uint32_t tenant = tenants.find(ev.tenant_id);
  const std::uint32_t model = models.find(ev.model_id);
  const std::uint32_t replica = replicas.find(ev.replica_id);
  const std::uint32_t tm = find_tm(tenant, model);
  if (tm == kNone || replica == kNone) return 0;
  std::size_t removed = 0;
  switch (ev.type) {
    case EventType::kPrefixEvicted:
      // The request's KV left the decode replica: its decode slot is free.
      release_decodes(tm, replica, group_hash(tm, ev.prefix_hash), false);
      removed = evict_prefix(ev, tm, replica);
      break;
    case EventType::kReplicaUpdated:
      refresh_replica(ev, tm, replica, now);
      break;
    case EventType::kAllCleared:
      release_decodes(tm, replica, 0, true);
      removed = clear_replica(ev, tenant, model, replica);
      break;
    default:
      break;  // PREFIX_ADDED and unknown types: acked, no-op
  }
  note_oldest(publish());
  return removed;
}

}  // namespace ic::index
