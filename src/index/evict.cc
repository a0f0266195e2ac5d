// Cap and quota eviction (docs/index.md "Eviction under pressure").
//
// Cap victims come in ascending order of (a, last_seen, key bytes, names,
// replica) with a = access_count on LFU tenants, else 0. Instead of sorting the
// index per ingest, a scan selects the K smallest coarse keys (a, last_seen)
// into a min-heap together with every entry tied at the largest of them (the
// threshold T). Every later change that puts an entry at or below T pushes a
// fresh record; records whose entry changed or died are skipped when popped.
// So the heap always holds every entry ≤ T, and its top group is the global
// minimum of the shard. A rescan happens only when the heap runs dry (every K
// evictions), making the amortized cost O(entries / K) per eviction.

#include <algorithm>
#include <bit>
#include <cstring>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {
constexpr std::size_t kVictimBatch = 16384;

// Coarse order (a, last_seen, entry): stable over time for a record.
bool coarse_less(const VictimRec& x, const VictimRec& y) {
  if (x.a != y.a) return x.a < y.a;
  if (x.last_seen != y.last_seen) return x.last_seen < y.last_seen;
  return x.entry < y.entry;
}
bool coarse_le_threshold(const VictimRec& x, const VictimRec& t) {
  if (x.a != t.a) return x.a < t.a;
  return x.last_seen <= t.last_seen;
}
bool same_coarse(const VictimRec& x, const VictimRec& y) {
  return x.a == y.a && x.last_seen == y.last_seen;
}
// std heap functions build a max-heap: invert for a min-heap.
struct HeapCmp {
  bool operator()(const VictimRec& x, const VictimRec& y) const { return coarse_less(y, x); }
};
}  // namespace

std::uint32_t Shard::Impl::order_a(std::uint32_t e) const {
  return tenant_recs[domains[keys[entry_key(e)].domain].k.tenant].lfu ? entry(e).access_count : 0;
}

VictimRec Shard::Impl::victim_of(std::uint32_t e) const {
  const EntryFields& er = entry(e);
  return VictimRec{e, er.gen, order_a(e), er.last_seen};
}

bool Shard::Impl::victim_current(const VictimRec& v) const {
  const EntryFields& er = entry(v.entry);
  return er.replica != kNone && er.gen == v.gen && er.last_seen == v.last_seen &&
         order_a(v.entry) == v.a;
}

// Full order between two CURRENT records (both entries live).
bool Shard::Impl::victim_full_less(const VictimRec& x, const VictimRec& y) const {
  if (x.a != y.a) return x.a < y.a;
  if (x.last_seen != y.last_seen) return x.last_seen < y.last_seen;
  const std::uint32_t xk = entry_key(x.entry), yk = entry_key(y.entry);
  if (xk != yk) {
    const KeyRec& kx = keys[xk];
    const KeyRec& ky = keys[yk];
    if (kx.entry.hash_len == 8 && ky.entry.hash_len == 8 && kx.hash != ky.hash) {
      // Two 8-byte hashes (the wire form): bytewise order = big-endian value order.
      auto be = [](std::uint64_t v) {
        return std::endian::native == std::endian::little ? __builtin_bswap64(v) : v;
      };
      return be(kx.hash) < be(ky.hash);
    }
    if (int c = key_bytes(kx).compare(key_bytes(ky)); c != 0) return c < 0;
    const DomainKey& dx = domains[kx.domain].k;
    const DomainKey& dy = domains[ky.domain].k;
    if (int c = tenants.name(dx.tenant).compare(tenants.name(dy.tenant)); c != 0) return c < 0;
    if (int c = models.name(dx.model).compare(models.name(dy.model)); c != 0) return c < 0;
    if (int c = schemes.name(dx.scheme).compare(schemes.name(dy.scheme)); c != 0) return c < 0;
    if (int c = adapters.name(dx.adapter).compare(adapters.name(dy.adapter)); c != 0) return c < 0;
  }
  return replicas.name(entry(x.entry).replica) < replicas.name(entry(y.entry).replica);
}

void Shard::Impl::invalidate_victims() {
  victims.clear();
  group.clear();
  group_pos = 0;
  victims_valid = false;
}

void Shard::Impl::push_victim(const VictimRec& v) {
  if (group_pos < group.size()) {
    const VictimRec& g = group[group_pos];
    if (same_coarse(v, g)) {
      auto it = std::lower_bound(group.begin() + static_cast<std::ptrdiff_t>(group_pos),
                                 group.end(), v, [&](const VictimRec& a, const VictimRec& b) {
                                   return victim_current(a) && victim_full_less(a, b);
                                 });
      group.insert(it, v);
      return;
    }
    if (coarse_less(v, g)) {
      // A smaller coarse value appeared: the cached group goes back to the heap.
      for (std::size_t i = group_pos; i < group.size(); ++i) {
        victims.push_back(group[i]);
        std::push_heap(victims.begin(), victims.end(), HeapCmp{});
      }
      group.clear();
      group_pos = 0;
    }
  }
  victims.push_back(v);
  std::push_heap(victims.begin(), victims.end(), HeapCmp{});
}

void Shard::Impl::on_order_change(std::uint32_t e) {
  if (!victims_valid) return;
  const VictimRec v = victim_of(e);
  if (!coarse_le_threshold(v, threshold)) return;
  if (victims.size() + group.size() > 8 * kVictimBatch + 1024) {
    // Too many stale records: forget the buffer; the next eviction rescans.
    invalidate_victims();
    return;
  }
  push_victim(v);
}

void Shard::Impl::rebuild_victims() {
  invalidate_victims();
  // Pass 1: the K smallest coarse values (bounded max-heap of (a, last_seen)).
  std::vector<VictimRec> best;
  best.reserve(kVictimBatch);
  auto max_cmp = [](const VictimRec& x, const VictimRec& y) { return coarse_less(x, y); };
  for (std::uint32_t e = entry_slot_from(0); !entry_slots_done(e); e = entry_slot_from(e + 1)) {
    if (!entry_live(e)) continue;
    keep_smallest(best, victim_of(e), kVictimBatch, max_cmp);
  }
  if (best.empty()) return;
  threshold = best.front();
  // Pass 2: every entry at or below the threshold's coarse value (ties included).
  if (best.size() < kVictimBatch) {
    victims = std::move(best);
  } else {
    victims.clear();
    for (std::uint32_t e = entry_slot_from(0); !entry_slots_done(e); e = entry_slot_from(e + 1)) {
      if (!entry_live(e)) continue;
      const VictimRec v = victim_of(e);
      if (coarse_le_threshold(v, threshold)) victims.push_back(v);
    }
  }
  std::make_heap(victims.begin(), victims.end(), HeapCmp{});
  victims_valid = true;
}

std::uint32_t Shard::Impl::pop_victim() {
  for (;;) {
    while (group_pos < group.size()) {
      const VictimRec v = group[group_pos++];
      if (victim_current(v)) return v.entry;
    }
    group.clear();
    group_pos = 0;
    if (victims.empty()) return kNone;
    // Take the whole smallest coarse group, keep its current records, and
    // order them by the full tie-break (key bytes, names, replica).
    const VictimRec top = victims.front();
    while (!victims.empty() && same_coarse(victims.front(), top)) {
      std::pop_heap(victims.begin(), victims.end(), HeapCmp{});
      if (victim_current(victims.back())) group.push_back(victims.back());
      victims.pop_back();
    }
    std::sort(group.begin(), group.end(),
              [&](const VictimRec& a, const VictimRec& b) { return victim_full_less(a, b); });
  }
}

std::uint32_t Shard::Impl::evict_cap(std::int64_t need) {
  std::uint32_t done = 0;
  while (need > 0 && entry_total > 0) {
    std::uint32_t e = victims_valid ? pop_victim() : kNone;
    if (e == kNone) {
      rebuild_victims();
      e = pop_victim();
      if (e == kNone) break;
    }
    evict_victim(e);
    ++done;
    --need;
  }
  return done;
}

void Shard::Impl::evict_victim(std::uint32_t e) {
  const bool lfu = tenant_recs[domains[keys[entry_key(e)].domain].k.tenant].lfu;
  ++(lfu ? evictions.lfu_cap : evictions.lru_cap);
  remove_entry(e);
}

std::int64_t Shard::Impl::key_newest(std::uint32_t k) const {
  std::int64_t n = INT64_MIN;
  for (std::uint32_t e = first_entry(k); e != kNone; e = next_entry(e))
    n = std::max(n, entry(e).last_seen);
  return n;
}

// Quota order: newest last_seen over the key's replicas, oldest first; ties by
// key bytes, then model / scheme / adapter names (all part of the key).
bool Shard::Impl::quota_less(std::int64_t xn, std::uint32_t x, std::int64_t yn,
                             std::uint32_t y) const {
  if (xn != yn) return xn < yn;
  const KeyRec& kx = keys[x];
  const KeyRec& ky = keys[y];
  if (int c = key_bytes(kx).compare(key_bytes(ky)); c != 0) return c < 0;
  const DomainKey& dx = domains[kx.domain].k;
  const DomainKey& dy = domains[ky.domain].k;
  if (int c = models.name(dx.model).compare(models.name(dy.model)); c != 0) return c < 0;
  if (int c = schemes.name(dx.scheme).compare(schemes.name(dy.scheme)); c != 0) return c < 0;
  return adapters.name(dx.adapter) < adapters.name(dy.adapter);
}

// One walk of the tenant's keys (its list, or one pass over the shard's key
// slots, docs/index.md "Layout and memory") keeps its `batch` smallest
// (bounded max-heap), so a tenant pinned at its quota walks them once per
// `batch` evictions instead of on every ingest.
void Shard::Impl::rebuild_quota_victims(TenantRec& t, std::uint32_t tenant, std::int64_t batch) {
  using V = TenantRec::QuotaVictim;
  auto less = [&](const V& a, const V& b) { return quota_less(a.newest, a.key, b.newest, b.key); };
  std::vector<V>& pick = t.quota_victims;
  pick.clear();
  t.quota_pos = 0;
  collect_tenant_keys(tenant);
  for (const std::uint32_t k : tenant_keys)
    keep_smallest(pick, V{key_newest(k), k, keys[k].entry.gen}, static_cast<std::size_t>(batch),
                  less);
  std::sort_heap(pick.begin(), pick.end(), less);
  t.quota_threshold = pick.empty() ? INT64_MIN : pick.back().newest;
  t.quota_valid = !pick.empty();
}

std::uint32_t Shard::Impl::enforce_quota(std::uint32_t tenant) {
  TenantRec& t = tenant_recs[tenant];
  if (t.quota < 0 || t.key_count <= t.quota) return 0;
  std::uint64_t& counter = tenant_evictions[tenants.name(tenant)];
  std::uint32_t removed = 0;
  quota_evicting = true;
  // `t` stays valid: removals never resize tenant_recs, and the tenant keeps
  // its record while it has keys (the loop stops before the last one goes).
  while (t.key_count > t.quota) {
    if (!t.quota_valid || t.quota_pos >= t.quota_victims.size()) {
      // The batch: a sixteenth of the tenant's keys, and for a tenant small
      // next to its shard up to all of them, so one pass over the shard's
      // keys (a tenant without a key list) pays for at least 1/256 of its key
      // count in evictions.
      const std::int64_t over = t.key_count - t.quota;
      const std::int64_t share = std::min(t.key_count, key_total / 256);
      rebuild_quota_victims(t, tenant, std::max({over, t.key_count / 16, share}));
      if (!t.quota_valid) break;
    }
    const TenantRec::QuotaVictim v = t.quota_victims[t.quota_pos++];
    const KeyRec& kr = keys[v.key];
    if (!kr.live() || kr.entry.gen != v.gen || key_newest(v.key) != v.newest) continue;  // changed
    const bool last_key = t.key_count == 1;
    // Removing the key's last entry removes the key.
    for (;;) {
      const std::uint32_t e = first_entry(v.key);
      const bool last = next_entry(e) == kNone;
      remove_entry(e);
      if (last) break;
    }
    ++counter;
    ++removed;
    if (last_key) break;  // budget 0: the tenant's records may be gone now
  }
  quota_evicting = false;
  return removed;
}

}  // namespace ic::index
