// Command-line forms of a block chain for the cli: Mooncake ids (decimal, sent as 8-byte
// big-endian), raw hex hashes with per-block token counts, or token ids chunked into
// fingerprinted blocks (docs/fingerprint.md) as the server chunks a token_ids lookup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::tools::cli {

// A chain ready for the wire: block_hashes and their parallel block_token_counts.
struct Chain {
  std::vector<std::string> hashes;
  std::vector<std::int32_t> tokens;
};

// From Mooncake ids: 512 tokens per block; when input_length > 0 the last block holds
// input_length − 512·(n−1) (must be in 1..512, else *error).
bool chain_from_ids(const std::vector<std::uint64_t>& ids, std::int32_t input_length, Chain* out,
                    std::string* error);

// From hex hashes and token counts (equal lengths; every count > 0; else *error).
bool chain_from_hex(const std::vector<std::string>& hex, const std::vector<std::int32_t>& tokens,
                    Chain* out, std::string* error);

// From token ids: the fingerprint prefix chain (docs/fingerprint.md) of every full block of
// `block_size` tokens, each counting block_size tokens; a trailing partial block is dropped,
// as the server drops it for a token_ids lookup (docs/lookup.md step 5). Fewer tokens than one
// block, or block_size ≤ 0 → *error.
bool chain_from_token_ids(const std::vector<std::uint32_t>& token_ids, std::int32_t block_size,
                          Chain* out, std::string* error);

}  // namespace ic::tools::cli
