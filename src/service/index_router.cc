#include "service/index_router.hh"

#include "index/partition.hh"
#include "metrics/registry.hh"

namespace ic::service {

IndexRouter::IndexRouter(CoreLink& link, std::vector<index::Shard*> shards, index::Clock& clock)
    : link_(link), shards_(std::move(shards)), clock_(clock) {
  for (unsigned core = 0; core < shards_.size(); ++core) {
    const int slot = shards_[core]->cap_slot();
    if (slot < 0) continue;
    if (slot_core_.size() <= static_cast<std::size_t>(slot)) slot_core_.resize(slot + 1, -1);
    slot_core_[slot] = static_cast<int>(core);
  }
}

void IndexRouter::hand_off_cap(int slot, unsigned hops) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= slot_core_.size() || hops >= shards_.size()) {
    return;
  }
  const int core = slot_core_[slot];
  if (core < 0) return;
  const bool posted = link_.post(static_cast<unsigned>(core), [this, core, hops] {
    hand_off_cap(shards_[core]->pay_cap_debt().handoff, hops + 1);
  });
  metrics::local().add_cross_core_post(posted);
}

unsigned IndexRouter::owner(std::string_view tenant_id) const {
  return index::owner_core(tenant_id, static_cast<unsigned>(shards_.size()));
}

}  // namespace ic::service
