#include "sharding/sharded_index.hh"

#include "base/check.hh"
#include "index/partition.hh"
#include "metrics/registry.hh"

namespace ic::sharding {

ShardedIndex::ShardedIndex(runtime::Cores& cores, std::vector<index::Shard*> shards,
                           index::Clock& clock)
    : cores_(cores), shards_(std::move(shards)), clock_(clock) {
  // owner() partitions tenants over shards_.size(); the verb posts to
  // cores_: the two must be the same cores.
  IC_CHECK(shards_.size() == cores_.cores(), "ShardedIndex: one shard per core");
  for (unsigned core = 0; core < shards_.size(); ++core) {
    IC_CHECK(shards_[core] != nullptr, "ShardedIndex: a core without its shard");
    const int slot = shards_[core]->cap_slot();
    if (slot < 0) continue;
    if (slot_core_.size() <= static_cast<std::size_t>(slot)) slot_core_.resize(slot + 1, -1);
    slot_core_[slot] = static_cast<int>(core);
  }
}

unsigned ShardedIndex::owner(std::string_view tenant_id) const {
  return index::owner_core(tenant_id, static_cast<unsigned>(shards_.size()));
}

std::optional<pb::CacheStateUpdate> ShardedIndex::ingest(unsigned core,
                                                         pb::CacheStateUpdate&& update,
                                                         std::uint64_t sequence) {
  return runtime::try_submit_to(
      cores_, core, std::move(update),
      [this, core, sequence](pb::CacheStateUpdate& u) {
        if (!early_apply(core, u.tenant_id(), sequence)) return;
        const auto result = apply_ingest(core, u, clock_.wall_us());
        metrics::local().add_ingest(result.entries_upserted);
        hand_off_cap(result.cap_handoff);
      },
      runtime::NoReply{});  // nothing travels back per message (see barrier)
}

template <typename Change, typename Apply>
auto ShardedIndex::apply_on_owner(unsigned core, const Change& change, std::int64_t now_wall_us,
                                  Apply apply) {
  if (placement_ == nullptr) return apply(*shards_[core], change, now_wall_us);
  placement_->before_apply(core, change.tenant_id());
  const auto result = apply(*shards_[core], change, now_wall_us);
  placement_->applied(core, change, now_wall_us);
  return result;
}

index::IngestResult ShardedIndex::apply_ingest(unsigned core, const pb::CacheStateUpdate& update,
                                               std::int64_t now_wall_us) {
  return apply_on_owner(core, update, now_wall_us, wire::ingest);
}

std::size_t ShardedIndex::apply_event_now(unsigned core, const pb::CacheEvent& event,
                                          std::int64_t now_wall_us) {
  return apply_on_owner(core, event, now_wall_us, wire::apply_event);
}

void ShardedIndex::set_policies(unsigned core,
                                const std::shared_ptr<const config::PolicySet>& set) {
  shards_[core]->set_policies(set);
  if (placement_ != nullptr) placement_->policies_changed(core, set);
}

void ShardedIndex::set_change_sink(unsigned core, index::ChangeSink* sink) {
  if (placement_ != nullptr) {
    placement_->set_change_sink(core, sink);
  } else {
    shards_[core]->set_change_sink(sink);
  }
}

void ShardedIndex::hand_off_cap(int slot, unsigned hops) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= slot_core_.size() || hops >= shards_.size()) {
    return;
  }
  const int core = slot_core_[slot];
  if (core < 0) return;
  const auto refused = runtime::try_submit(cores_, static_cast<unsigned>(core), [this, core, hops] {
    hand_off_cap(shards_[core]->pay_cap_debt().handoff, hops + 1);
  });
  metrics::local().add_cross_core_post(!refused);
}

}  // namespace ic::sharding
