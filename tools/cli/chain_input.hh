// Command-line forms of a block chain for the cli: Mooncake ids (decimal, sent as 8-byte
// big-endian) or raw hex hashes with per-block token counts.
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

}  // namespace ic::tools::cli
