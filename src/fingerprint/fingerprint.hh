#pragma once
// Content fingerprint of token ids: the XXH3-64 (seed 1337) prefix chain that
// producers and consumers both compute so they key the index identically
// (docs/fingerprint.md; golden vectors in tests/data/fingerprint_golden_vectors.json).

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ic::fingerprint {

// XXH3-64 seed of every hash in the scheme (docs/fingerprint.md).
inline constexpr std::uint64_t kSeed = 1337;

// Content hash of one KV block: XXH3-64(seed) over the block's token ids, each
// as a little-endian uint32. `tokens` may be any length (the caller slices blocks).
std::uint64_t content_hash(std::span<const std::uint32_t> tokens);

// Chains one block onto its parent prefix: XXH3-64(seed) over
// le_u64(parent) ++ le_u64(content).
std::uint64_t chain_hash(std::uint64_t parent, std::uint64_t content);

// Content hashes of every FULL block of `block_size` tokens; a trailing partial
// block is dropped; block_size ≤ 0 or no full block → empty.
std::vector<std::uint64_t> content_hashes(std::span<const std::uint32_t> tokens,
                                          std::int32_t block_size);

// Prefix hashes of every full block: prefix[0] = content[0] (or
// chain_hash(*parent, content[0]) when the prefix before these tokens is known:
// the suffix-event case), prefix[i] = chain_hash(prefix[i−1], content[i]).
// Block i identifies the whole prefix 0..i. block_size ≤ 0 or no full block → empty.
std::vector<std::uint64_t> prefix_hashes(std::span<const std::uint32_t> tokens,
                                         std::int32_t block_size,
                                         std::optional<std::uint64_t> parent = std::nullopt);

// The same prefix hashes (no parent) in wire form, written to `out` (resized
// to 8 bytes per full block) without an intermediate vector: the lookup path
// reuses `out` across calls. Returns the number of blocks.
std::size_t wire_prefix_hashes(std::span<const std::uint32_t> tokens, std::int32_t block_size,
                               std::string& out);

// Wire form of a prefix hash: the 8 bytes big-endian (docs/fingerprint.md).
std::array<std::uint8_t, 8> to_wire(std::uint64_t hash);
// Inverse of to_wire for exactly 8 bytes.
std::uint64_t from_wire(std::span<const std::uint8_t, 8> bytes);

}  // namespace ic::fingerprint
