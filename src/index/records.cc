// Record plumbing of the shard: interned ids, key/entry creation and the
// removal cascade entry → key → domain → (tenant, model) → tenant.

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "base/check.hh"
#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

std::uint32_t Shard::Impl::find_key(std::uint32_t domain, std::string_view bytes) const {
  return find_key_hashed(domain, group_hash(domains[domain].tm, bytes), bytes);
}

std::uint32_t Shard::Impl::find_entry(std::uint32_t k, std::uint32_t replica) const {
  const KeyRec& kr = keys[k];
  if (kr.entry.replica == replica) return k;
  for (std::uint32_t s = kr.spill; s != kNone; s = spills[s].next) {
    if (spills[s].entry.replica == replica) return s | kSpill;
  }
  return kNone;
}

std::uint32_t Shard::Impl::find_tm(std::uint32_t tenant, std::uint32_t model) const {
  if (tenant == kNone || model == kNone) return kNone;
  auto it = tm_ids.find((std::uint64_t{tenant} << 32) | model);
  return it == tm_ids.end() ? kNone : it->second;
}

std::uint32_t Shard::Impl::find_scope(std::uint32_t tm, std::uint32_t scheme) const {
  if (tm == kNone || scheme == kNone) return kNone;
  auto it = scope_ids.find((std::uint64_t{tm} << 32) | scheme);
  return it == scope_ids.end() ? kNone : it->second;
}

std::uint32_t Shard::Impl::find_domain(std::string_view tenant, std::string_view model,
                                       std::string_view scheme, std::string_view adapter) const {
  return find_domain(DomainKey{tenants.find(tenant), models.find(model), schemes.find(scheme),
                               adapters.find(adapter)});
}

std::uint32_t Shard::Impl::find_domain(const DomainKey& k) const {
  if (k.tenant == kNone || k.model == kNone || k.scheme == kNone || k.adapter == kNone)
    return kNone;
  auto it = domain_ids.find(k);
  return it == domain_ids.end() ? kNone : it->second;
}

TenantRec& Shard::Impl::tenant_rec(std::uint32_t tenant) {
  if (tenant >= tenant_recs.size()) tenant_recs.resize(tenants.capacity());
  return tenant_recs[tenant];
}

std::int64_t Shard::Impl::ttl_for_policy(const config::CachePolicy& p) const {
  return p.eviction_ttl_us > 0 ? p.eviction_ttl_us : cfg.default_ttl_us;
}

void Shard::Impl::refresh_tenant_policy(std::uint32_t tenant) {
  TenantRec& t = tenant_rec(tenant);
  const std::string& name = tenants.name(tenant);
  const config::CachePolicy& p = policies->policy_for(name);
  t.ttl_us = ttl_for_policy(p);
  t.lfu = p.eviction == config::EvictionAlgorithm::kLfu;
  const config::TenantQuota* q = policies->quota_for(name);
  t.quota = q ? q->max_index_entries : -1;
}

std::int64_t Shard::Impl::ttl_of(std::uint32_t tenant) const { return tenant_recs[tenant].ttl_us; }

std::uint32_t Shard::Impl::get_or_create_tm(std::uint32_t tenant, std::uint32_t model) {
  const std::uint64_t id = (std::uint64_t{tenant} << 32) | model;
  if (auto it = tm_ids.find(id); it != tm_ids.end()) return it->second;
  const std::uint32_t tm = take_slot(tms, tm_free);
  TmRec& r = tms[tm];
  r = TmRec{};
  r.tenant = tenant;
  r.model = model;
  r.live = true;
  tenants.ref(tenant);
  models.ref(model);
  tm_ids.emplace(id, tm);
  TenantRec& t = tenant_rec(tenant);
  r.in_tenant = static_cast<std::uint32_t>(t.tms.size());
  t.tms.push_back(tm);
  if (t.tms.size() == 1) {
    refresh_tenant_policy(tenant);
    t.listed = true;  // a new tenant is small: list its keys (tenant_keys.cc)
  }
  if (model >= model_keys.size()) model_keys.resize(models.capacity(), 0);
  return tm;
}

void Shard::Impl::maybe_remove_tm(std::uint32_t tm) {
  TmRec& r = tms[tm];
  if (r.domain_count != 0 || !r.stats.empty()) return;
  tm_ids.erase((std::uint64_t{r.tenant} << 32) | r.model);
  TenantRec& t = tenant_recs[r.tenant];
  IC_CHECK(r.in_tenant < t.tms.size() && t.tms[r.in_tenant] == tm,
           "a (tenant, model) record is listed by its tenant");
  t.tms[r.in_tenant] = t.tms.back();
  tms[t.tms.back()].in_tenant = r.in_tenant;
  t.tms.pop_back();
  if (t.tms.empty()) {
    unlist(t);
    t = TenantRec{};
  }
  const std::uint32_t tenant = r.tenant, model = r.model;
  r.live = false;
  r.stats.clear();
  r.stats.shrink_to_fit();
  tm_free.push_back(tm);
  tenants.release(tenant);
  std::string model_name = models.name(model);
  if (models.release(model)) {
    // The model's last (tenant, model) is gone: its gauge reads 0 once.
    drained_models.push_back(std::move(model_name));
    model_keys[model] = 0;
  }
}

std::uint32_t Shard::Impl::get_or_create_domain(std::string_view tenant, std::string_view model,
                                                std::string_view scheme, std::string_view adapter) {
  const std::uint32_t found = find_domain(tenant, model, scheme, adapter);
  if (found != kNone) return found;
  DomainKey k{tenants.acquire(tenant), models.acquire(model), schemes.acquire(scheme),
              adapters.acquire(adapter)};
  const std::uint32_t d = take_slot(domains, domain_free);
  DomainRec& dr = domains[d];
  dr = DomainRec{};
  dr.k = k;
  dr.tm = get_or_create_tm(k.tenant, k.model);
  ++tms[dr.tm].domain_count;
  const std::uint64_t sid = (std::uint64_t{dr.tm} << 32) | k.scheme;
  auto it = scope_ids.find(sid);
  if (it == scope_ids.end()) {
    const std::uint32_t s = take_slot(scopes, scope_free);
    scopes[s] = ScopeRec{};
    scopes[s].tm = dr.tm;
    scopes[s].scheme = k.scheme;
    scopes[s].live = true;
    it = scope_ids.emplace(sid, s).first;
  }
  dr.scope = it->second;
  ++scopes[dr.scope].domain_count;
  domain_ids.emplace(k, d);
  return d;
}

void Shard::Impl::remove_domain(std::uint32_t d) {
  DomainRec& dr = domains[d];
  const DomainKey k = dr.k;
  const std::uint32_t tm = dr.tm;
  ScopeRec& sr = scopes[dr.scope];
  if (--sr.domain_count == 0) {
    scope_ids.erase((std::uint64_t{sr.tm} << 32) | sr.scheme);
    sr.live = false;
    sr.members.clear();
    sr.members.shrink_to_fit();
    clear_loads(sr);
    clear_work(sr.work);
    scope_free.push_back(dr.scope);
  }
  domain_ids.erase(k);
  dr = DomainRec{};
  domain_free.push_back(d);
  --tms[tm].domain_count;
  // tm still holds tenant/model references; release the domain's own four.
  schemes.release(k.scheme);
  adapters.release(k.adapter);
  tenants.release(k.tenant);
  models.release(k.model);
  maybe_remove_tm(tm);
}

std::uint32_t Shard::Impl::create_key(std::uint32_t domain, std::string_view bytes, std::uint64_t h,
                                      std::size_t hole) {
  const std::uint32_t k = keys.allocate_fresh();
  KeyRec& kr = keys[k];
  if (bytes.size() <= 8) {
    kr.entry.hash_len = static_cast<std::uint8_t>(bytes.size());
    if (!bytes.empty()) std::memcpy(&kr.hash, bytes.data(), bytes.size());
  } else {
    kr.entry.hash_len = kLongHash;
    std::uint32_t slot;
    if (!long_free.empty()) {
      slot = long_free.back();
      long_free.pop_back();
      long_hashes[slot].assign(bytes);
    } else {
      slot = static_cast<std::uint32_t>(long_hashes.size());
      long_hashes.emplace_back(bytes);
    }
    kr.hash = slot;
  }
  // Not live yet (allocate_fresh left no domain): a growth re-places the
  // others, then the new key goes in.
  key_table.insert_at(h, k, hole, [this](auto&& put) { each_key_hash(put); });
  keys[k].domain = domain;
  DomainRec& dr = domains[domain];
  ++tenant_recs[dr.k.tenant].key_count;
  ++tms[dr.tm].key_count;
  ++model_keys[dr.k.model];
  ++dr.key_count;
  ++key_total;
  list_key(dr.k.tenant, k);
  return k;
}

void Shard::Impl::remove_key_record(std::uint32_t k) {
  KeyRec& kr = keys[k];
  const std::uint32_t d = kr.domain;
  DomainRec& dr = domains[d];
  key_table.erase(key_hash(k), k, [this](std::uint32_t x) { return key_hash(x); });
  --tenant_recs[dr.k.tenant].key_count;
  --tms[dr.tm].key_count;
  --model_keys[dr.k.model];
  --key_total;
  if (kr.entry.hash_len == kLongHash) {
    long_hashes[kr.hash].clear();
    long_hashes[kr.hash].shrink_to_fit();
    long_free.push_back(static_cast<std::uint32_t>(kr.hash));
  }
  kr.domain = kNone;
  ++kr.entry.gen;
  keys.free(k);
  if (--dr.key_count == 0) remove_domain(d);
}

std::uint32_t Shard::Impl::create_entry(std::uint32_t k, std::uint32_t replica) {
  std::uint32_t e = k;
  if (keys[k].entry.replica != kNone) {
    // The inline entry is taken: a SpillRec at the head of the key's list.
    const std::uint32_t s = spills.allocate_fresh();
    spills[s].key = k;
    spills[s].next = keys[k].spill;
    keys[k].spill = s;
    e = s | kSpill;
  }
  EntryFields& f = entry(e);
  const std::uint8_t hash_len = f.hash_len;
  const std::uint16_t gen = f.gen;
  f = EntryFields{};
  f.replica = replica;
  f.hash_len = hash_len;
  f.gen = gen;
  replicas.ref(replica);
  const DomainRec& dr = domains[keys[k].domain];
  scope_add(dr.scope, replica);
  ++entry_total;
  ++unpublished;
  return e;
}

void Shard::Impl::free_entry(std::uint32_t e) {
  if ((e & kSpill) == 0) {
    // The inline slot stays with the key (empty) for its next replica.
    EntryFields& f = keys[e].entry;
    f.replica = kNone;
    ++f.gen;
    return;
  }
  const std::uint32_t s = e & ~kSpill;
  KeyRec& kr = keys[spills[s].key];
  if (kr.spill == s) {
    kr.spill = spills[s].next;
  } else {
    std::uint32_t p = kr.spill;
    while (spills[p].next != s) p = spills[p].next;
    spills[p].next = spills[s].next;
  }
  spills[s].entry.replica = kNone;
  ++spills[s].entry.gen;
  spills.free(s);
}

void Shard::Impl::remove_entry(std::uint32_t e) {
  if (sink != nullptr) report_removal(e);
  const std::uint32_t k = entry_key(e);
  const EntryFields& f = entry(e);
  const std::uint32_t replica = f.replica;
  const DomainRec& dr = domains[keys[k].domain];
  // A removal may lower a key's newest last_seen below the quota threshold.
  if (!quota_evicting) tenant_recs[dr.k.tenant].drop_quota_victims();
  scope_sub(dr.scope, replica);
  tenant_replica_sub(dr.k.tenant, replica, f.last_seen);
  replicas.release(replica);
  free_entry(e);
  --entry_total;
  --unpublished;
  if (first_entry(k) == kNone) remove_key_record(k);
}

void Shard::Impl::scope_add(std::uint32_t scope, std::uint32_t replica) {
  auto& m = scopes[scope].members;
  const std::size_t hint = scope_add_hint;
  if (hint < m.size() && m[hint].replica == replica) {
    ++m[hint].entries;
    return;
  }
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i].replica == replica) {
      ++m[i].entries;
      scope_add_hint = i;
      return;
    }
  }
  const std::string& name = replicas.name(replica);
  auto pos = std::lower_bound(
      m.begin(), m.end(), name,
      [&](const ScopeMember& a, const std::string& n) { return replicas.name(a.replica) < n; });
  m.insert(pos, ScopeMember{replica, 1});
}

void Shard::Impl::scope_sub(std::uint32_t scope, std::uint32_t replica) {
  auto& m = scopes[scope].members;
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (it->replica == replica) {
      if (--it->entries == 0) m.erase(it);
      return;
    }
  }
}

TenantReplicaRec* Shard::Impl::find_tenant_replica(std::uint64_t id) {
  // One ingest adds its entries under one (tenant, replica): remember the
  // last row found (map elements stay put until erased).
  if (tenant_replica_last != nullptr && tenant_replica_last_id == id) return tenant_replica_last;
  const auto it = tenant_replicas.find(id);
  if (it == tenant_replicas.end()) return nullptr;
  tenant_replica_last_id = id;
  return tenant_replica_last = &it->second;
}

void Shard::Impl::tenant_replica_add(std::uint32_t tenant, std::uint32_t replica,
                                     std::int64_t seen) {
  const std::uint64_t id = (std::uint64_t{tenant} << 32) | replica;
  TenantReplicaRec* r = find_tenant_replica(id);
  if (r == nullptr) r = &tenant_replicas[id];
  ++r->entries;
  r->moved(INT64_MIN, seen);
}

void Shard::Impl::tenant_replica_sub(std::uint32_t tenant, std::uint32_t replica,
                                     std::int64_t seen) {
  const std::uint64_t id = (std::uint64_t{tenant} << 32) | replica;
  TenantReplicaRec* r = find_tenant_replica(id);
  if (r == nullptr) return;
  if (--r->entries <= 0) {
    tenant_replica_last = nullptr;
    tenant_replicas.erase(id);
  } else {
    r->moved(seen, INT64_MIN);
  }
}

void Shard::Impl::tenant_replica_seen(std::uint32_t tenant, std::uint32_t replica,
                                      std::int64_t from, std::int64_t to) {
  TenantReplicaRec* r = find_tenant_replica((std::uint64_t{tenant} << 32) | replica);
  if (r != nullptr) r->moved(from, to);
}

void Shard::Impl::refresh_stale_newest() const {
  // (newest, entries at it) of every row whose newest is only an upper bound.
  std::unordered_map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> stale;
  for (const auto& [id, tr] : tenant_replicas) {
    if (tr.at_newest <= 0) stale.emplace(id, std::pair<std::int64_t, std::int64_t>{INT64_MIN, 0});
  }
  if (stale.empty()) return;
  // One pass over the entries recomputes them all (rare: only after the
  // newest entries of a (tenant, replica) went or moved back).
  for (std::uint32_t e = entry_slot_from(0); !entry_slots_done(e); e = entry_slot_from(e + 1)) {
    const EntryFields& er = entry(e);
    if (er.replica == kNone) continue;
    const std::uint32_t tenant = domains[keys[entry_key(e)].domain].k.tenant;
    const auto it = stale.find((std::uint64_t{tenant} << 32) | er.replica);
    if (it == stale.end()) continue;
    auto& [newest, count] = it->second;
    if (er.last_seen > newest) {
      newest = er.last_seen;
      count = 1;
    } else if (er.last_seen == newest) {
      ++count;
    }
  }
  for (const auto& [id, v] : stale) {
    TenantReplicaRec& tr = tenant_replicas.find(id)->second;
    tr.newest = v.first;
    tr.at_newest = v.second;
  }
}

std::int64_t Shard::Impl::publish() {
  const std::int64_t d = unpublished;
  unpublished = 0;
  if (d == 0) return globals->total_entries.load(std::memory_order_relaxed);
  return globals->total_entries.fetch_add(d, std::memory_order_relaxed) + d;
}

}  // namespace ic::index
