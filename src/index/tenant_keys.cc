// Per-tenant key lists (docs/index.md "Layout and memory"): what ALL_CLEARED
// and the tenant quota walk instead of the shard's key slots, so that a small
// tenant next to a large one pays for its own keys. Key records carry no
// tenant links (8 bytes a key); a tenant small next to its shard keeps a
// vector of its key ids instead, within a budget of ids per shard, and the
// others (large tenants, or small ones past the budget) are found by one pass
// over the key slots, which costs a large tenant at most 256 times its keys.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {
// A tenant may keep a list up to max(kListedKeysFloor, shard keys / 256) keys.
constexpr std::size_t kListedKeysFloor = 4096;
constexpr std::size_t kListedShare = 256;
// Every list of a shard together: max(kListIdsFloor, shard keys / 8) ids of
// capacity (0.5 bytes per key at most; 256 KB for a small shard).
constexpr std::size_t kListIdsFloor = 65536;
constexpr std::size_t kListIdsShare = 8;
constexpr std::size_t kFirstCapacity = 16;
}  // namespace

bool Shard::Impl::may_list(std::int64_t tenant_key_count, std::size_t more_ids) const {
  const auto shard_keys = static_cast<std::size_t>(key_total);
  return static_cast<std::size_t>(tenant_key_count) <=
             std::max(kListedKeysFloor, shard_keys / kListedShare) &&
         listed_ids + more_ids <= std::max(kListIdsFloor, shard_keys / kListIdsShare);
}

void Shard::Impl::unlist(TenantRec& t) {
  listed_ids -= t.key_list.capacity();
  t.key_list = {};
  t.listed = false;
}

void Shard::Impl::compact_key_list(TenantRec& t, std::uint32_t tenant) {
  std::vector<std::uint32_t>& ids = t.key_list;
  std::erase_if(ids, [&](std::uint32_t k) {
    const KeyRec& kr = keys[k];
    return !kr.live() || domains[kr.domain].k.tenant != tenant;
  });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.size() < ids.capacity() / 4) {
    // The tenant shrank: hand most of the capacity back to the budget.
    listed_ids -= ids.capacity();
    ids.shrink_to_fit();
    listed_ids += ids.capacity();
  }
}

void Shard::Impl::list_key(std::uint32_t tenant, std::uint32_t k) {
  TenantRec& t = tenant_recs[tenant];
  if (!t.listed) return;
  std::vector<std::uint32_t>& ids = t.key_list;
  if (ids.size() == ids.capacity()) {
    // Full: drop the stale ids first; grow (double) only when that freed
    // less than half, and only within the tenant's size and the budget.
    compact_key_list(t, tenant);
    if (ids.size() >= ids.capacity() / 2) {
      const std::size_t grown = std::max(kFirstCapacity, 2 * ids.capacity());
      if (!may_list(t.key_count, grown - ids.capacity())) {
        unlist(t);
        return;
      }
      listed_ids -= ids.capacity();
      ids.reserve(grown);
      listed_ids += ids.capacity();
    }
  }
  ids.push_back(k);
}

void Shard::Impl::collect_tenant_keys(std::uint32_t tenant) {
  TenantRec& t = tenant_recs[tenant];
  tenant_keys.clear();
  if (t.listed) {
    compact_key_list(t, tenant);
    tenant_keys.assign(t.key_list.begin(), t.key_list.end());
    return;
  }
  const std::uint32_t hw = keys.high_water();
  for (std::uint32_t k = 0; k < hw; ++k) {
    const KeyRec& kr = keys[k];
    if (kr.live() && domains[kr.domain].k.tenant == tenant) tenant_keys.push_back(k);
  }
  // The pass found every key of the tenant: keep them as its list when it
  // is small enough now (it may have shrunk since it lost its list).
  if (!t.tms.empty() && may_list(t.key_count, tenant_keys.size())) {
    t.key_list.assign(tenant_keys.begin(), tenant_keys.end());
    t.key_list.shrink_to_fit();
    listed_ids += t.key_list.capacity();
    t.listed = true;
  }
}

}  // namespace ic::index
