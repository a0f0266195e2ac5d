#include "service/index_router.hh"

#include "index/partition.hh"

namespace ic::service {

IndexRouter::IndexRouter(CoreLink& link, std::vector<index::Shard*> shards, index::Clock& clock)
    : link_(link), shards_(std::move(shards)), clock_(clock) {}

unsigned IndexRouter::owner(std::string_view tenant_id) const {
  return index::owner_core(tenant_id, static_cast<unsigned>(shards_.size()));
}

}  // namespace ic::service
