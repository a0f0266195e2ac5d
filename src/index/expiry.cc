// Expiry (docs/index.md "Expiry (TTL)"): the bounded TTL sweep of entries
// and, at the end of each pass, of stats entries.

#include "base/check.hh"
#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

void Shard::Impl::expire_stats(std::int64_t now) {
  for (std::uint32_t tm = 0; tm < tms.size(); ++tm) {
    TmRec& r = tms[tm];
    if (!r.live || r.stats.empty()) continue;
    const std::int64_t ttl = tenant_recs[r.tenant].ttl_us;
    for (std::size_t i = r.stats.size(); i-- > 0;) {
      if (now - r.stats[i].last_seen < ttl) continue;
      const std::uint32_t replica = r.stats[i].replica;
      r.stats.erase(r.stats.begin() + static_cast<std::ptrdiff_t>(i));
      IC_CHECK(stats_total > 0, "the stats entry count covers every entry");
      --stats_total;
      replicas.release(replica);
    }
    maybe_remove_tm(tm);
  }
}

bool Shard::Impl::sweep_slice(std::int64_t now, std::size_t budget) {
  std::uint32_t e = entry_slot_from(sweep_cursor);
  for (std::size_t n = 0; n < budget && !entry_slots_done(e); ++n, e = entry_slot_from(e + 1)) {
    const EntryFields& er = entry(e);
    if (er.replica == kNone) continue;
    const TenantRec& t = tenant_recs[domains[keys[entry_key(e)].domain].k.tenant];
    if (now - er.last_seen < t.ttl_us) continue;
    ++(t.lfu ? evictions.lfu_ttl : evictions.lru_ttl);
    remove_entry(e);
  }
  sweep_cursor = e;
  const bool done = entry_slots_done(e);
  if (done) {
    sweep_cursor = 0;
    expire_stats(now);
  }
  note_oldest(publish());
  return done;
}

}  // namespace ic::index
