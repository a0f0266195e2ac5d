#pragma once
// The AFFINITY_HINT pick computed independently of the index
// (docs/lookup.md step 12), the oracle the lookup tests compare with.
#include <cstdint>
#include <string>
#include <vector>

namespace ic::test {

// The replica AFFINITY_HINT must pick for `seed`: the first 8 bytes of SHA-256(seed),
// big-endian, modulo the number of `sorted` candidates (sorted by replica id).
std::string affinity_pick(const std::string& seed, const std::vector<std::string>& sorted);

// The affinity seed of a block chain: per block a 4-byte big-endian length (8) and the
// 8-byte block_hash() of the value.
std::string chain_seed(const std::vector<std::uint64_t>& blocks);

}  // namespace ic::test
