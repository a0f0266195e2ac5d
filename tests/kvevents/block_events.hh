// The engine events the kvevents tests publish and decode, built in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kvevents/event.hh"

namespace ic::tools::kvevents::test {

// A vLLM BlockStored on the GPU medium: 16-token blocks `hashes` holding `token_ids`, chained
// to `parent` (none: the chain's first block).
inline BlockStored store(std::vector<std::uint64_t> hashes, std::vector<std::uint32_t> token_ids,
                         std::optional<std::uint64_t> parent = std::nullopt) {
  BlockStored s;
  s.block_hashes = std::move(hashes);
  s.token_ids = std::move(token_ids);
  s.block_size = 16;
  s.parent_block_hash = parent;
  s.medium = "GPU";
  return s;
}

}  // namespace ic::tools::kvevents::test
