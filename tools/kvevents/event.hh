// Engine KV events as the adapter sees them after decoding (docs/kvevents.md "What it accepts on
// the wire"): vLLM's and SGLang's BlockStored / BlockRemoved / AllBlocksCleared, with every hash
// normalised to 64 bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ic::tools::kvevents {

// A block was stored: `block_hashes` (engine hashes, one per full block of `token_ids`),
// continuing the prefix that ends at `parent_block_hash` (nil = the prompt's first block).
struct BlockStored {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent_block_hash;
  std::vector<std::uint32_t> token_ids;
  std::int64_t block_size = 0;            // tokens per block, from the engine
  std::optional<std::int64_t> lora_id;    // engine-local load-order id; nil = base model
  std::optional<std::string> medium;      // "GPU", "CPU", ...; nil = GPU
  std::optional<std::string> lora_name;   // stable adapter name (also a bare extra_keys string)
  std::optional<std::string> cache_salt;  // per-tenant salt of the prompt's first block
  std::int64_t group_idx = 0;             // KV cache group; only group 0 is indexed
};

// Blocks left the cache `medium` (nil = GPU).
struct BlockRemoved {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::string> medium;
  std::int64_t group_idx = 0;
};

// The engine dropped its whole prefix cache.
struct AllBlocksCleared {};

using Event = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

// One published batch: `[ts, events, dp_rank?]` or `{ts, events, data_parallel_rank}`.
struct Batch {
  double ts = 0;                        // engine wall clock, seconds
  std::optional<std::int64_t> dp_rank;  // nil: the publisher's own rank
  std::vector<Event> events;            // decodable events, in order
  int malformed_events = 0;             // skipped: wrong shape or types
  int unknown_events = 0;               // skipped: a tag this adapter does not know
};

}  // namespace ic::tools::kvevents
