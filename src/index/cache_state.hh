#pragma once
// The index's own GetCacheState types (docs/index.md "GetCacheState").

#include <cstdint>
#include <string_view>
#include <vector>

#include "index/snapshot.hh"

namespace ic::index {

struct CacheStateQuery {
  std::string_view tenant_id, model_id;
};

// What a shard holds for (tenant, model). Fill by Shard::get_cache_state (it
// clears it first); the views are valid until the shard's next call.
struct CacheState {
  std::int64_t total_prefixes = 0;  // distinct keys of (tenant, model)
  std::int64_t hot_prefixes = 0;    // always 0 (no hot-prefix tracking)
  std::vector<StatsView> replicas;  // stats entries sorted by replica_id, bytewise
};

}  // namespace ic::index
