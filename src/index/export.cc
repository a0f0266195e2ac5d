// Shard export for the state file (docs/persistence.md): visits entries and
// stats as plain views, in bounded slices, without touching any order or count.

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

bool Shard::export_entries(std::uint32_t* cursor, std::size_t budget,
                           const std::function<void(const EntryView&)>& fn) const {
  const Impl& s = *impl_;
  const std::uint32_t hw = s.entries.high_water();
  std::uint32_t e = *cursor;
  for (std::size_t n = 0; n < budget && e < hw; ++n, ++e) {
    const EntryRec& er = s.entries[e];
    if (!er.live) continue;
    const KeyRec& k = s.keys[er.key];
    const DomainKey& d = s.domains[k.domain].k;
    EntryView v;
    v.tenant = s.tenants.name(d.tenant);
    v.model = s.models.name(d.model);
    v.hash_scheme = s.schemes.name(d.scheme);
    v.adapter = s.adapters.name(d.adapter);
    v.prefix_hash = s.key_bytes(k);
    v.replica = s.replicas.name(er.replica);
    v.token_count = er.token_count;
    v.last_seen_us = er.last_seen;
    v.tier = er.tier;
    fn(v);
  }
  const bool done = e >= hw;
  *cursor = done ? 0 : e;
  return done;
}

void Shard::export_stats(const std::function<void(const StatsView&)>& fn) const {
  const Impl& s = *impl_;
  for (const TmRec& tm : s.tms) {
    if (!tm.live) continue;
    for (const StatsRec& r : tm.stats) fn(s.stats_view(tm, r));
  }
}

}  // namespace ic::index
