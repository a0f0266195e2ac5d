// Change reports for the StreamCacheEvents fan-out (index/change.hh): one
// function per kind of change, called from its single emission point only
// when a sink is installed.

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

Change Shard::Impl::prefix_change(ChangeType type, std::uint32_t e) const {
  const EntryFields& er = entry(e);
  const KeyRec& kr = keys[entry_key(e)];
  const DomainKey& d = domains[kr.domain].k;
  Change c;
  c.type = type;
  c.tenant_id = tenants.name(d.tenant);
  c.model_id = models.name(d.model);
  c.replica_id = replicas.name(er.replica);
  c.adapter_id = adapters.name(d.adapter);
  c.prefix_hash = key_bytes(kr);
  return c;
}

void Shard::Impl::report_upsert(std::uint32_t e) {
  Change c = prefix_change(ChangeType::kPrefixAdded, e);
  c.timestamp_us = entry(e).last_seen;
  sink->on_change(c);
}

void Shard::Impl::report_removal(std::uint32_t e) {
  if (quiet_removals) return;
  sink->on_change(prefix_change(ChangeType::kPrefixEvicted, e));
}

void Shard::Impl::report_replica(ChangeType type, std::uint32_t tm, std::uint32_t replica,
                                 std::int64_t seen) {
  Change c;
  c.type = type;
  c.tenant_id = tenants.name(tms[tm].tenant);
  c.model_id = models.name(tms[tm].model);
  c.replica_id = replicas.name(replica);
  c.timestamp_us = seen;
  sink->on_change(c);
}

void Shard::Impl::report_cleared(const Event& ev) {
  Change c;
  c.type = ChangeType::kAllCleared;
  c.tenant_id = ev.tenant_id;
  c.model_id = ev.model_id;
  c.replica_id = ev.replica_id;
  sink->on_change(c);
}

void Shard::set_change_sink(ChangeSink* sink) noexcept { impl_->sink = sink; }

}  // namespace ic::index
