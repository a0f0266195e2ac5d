#pragma once
// A tenant's index state as state-file chunks (docs/persistence.md "What is
// saved"), to build a spread tenant's copy from its owner (docs/placement.md
// "Resync"): the same export and restore as a warm restart.

#include <string>
#include <string_view>
#include <vector>

#include "index/shard.hh"

namespace ic::placement {

// Every entry and stats row of `tenant` in `shard`, as serialized
// StateChunks. Walks the whole shard: O(its entry slots). Call on the shard's
// core (or with the runtime stopped).
std::vector<std::string> export_tenant(const index::Shard& shard, std::string_view tenant);

// Ingests `chunks` (export_tenant's) into `shard`; unparsable chunks are
// skipped (they cannot occur: this process wrote them).
void load_chunks(index::Shard& shard, const std::vector<std::string>& chunks);

}  // namespace ic::placement
