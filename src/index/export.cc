// Shard export for the state file (docs/persistence.md): visits entries and
// stats as plain views, in bounded slices, without touching any order or count.

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

bool Shard::export_entries(std::uint32_t* cursor, std::size_t budget,
                           const std::function<void(const EntryView&)>& fn) const {
  const Impl& s = *impl_;
  std::uint32_t e = s.entry_slot_from(*cursor);
  for (std::size_t n = 0; n < budget && !s.entry_slots_done(e); ++n, e = s.entry_slot_from(e + 1)) {
    const EntryFields& er = s.entry(e);
    if (er.replica == kNone) continue;
    const KeyRec& k = s.keys[s.entry_key(e)];
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
  const bool done = s.entry_slots_done(e);
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
