#include "fingerprint/fingerprint.hh"

// XXH3 inlined into this file (xxhash.h's XXH_INLINE_ALL, the same algorithm
// and results as the shared library): a prompt of 100k tokens hashes ~6,700
// blocks of 64 bytes and chains ~6,700 pairs of 16 bytes, and through the
// library each call paid its dispatch on length and seed (~120 instructions
// for 16 bytes); inlined, the fixed lengths below fold most of it away.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <cstring>

namespace ic::fingerprint {
namespace {

// Little-endian byte image of a uint64 independent of the host order.
void put_le64(std::uint8_t* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Calls fn(i, prefix hash of block i) for every full block, in order.
template <typename Fn>
std::size_t for_each_prefix_hash(std::span<const std::uint32_t> tokens, std::int32_t block_size,
                                 std::optional<std::uint64_t> parent, Fn&& fn) {
  if (block_size <= 0) return 0;
  const std::size_t bs = static_cast<std::size_t>(block_size);
  const std::size_t blocks = tokens.size() / bs;
  std::uint64_t prefix = 0;
  for (std::size_t i = 0; i < blocks; ++i) {
    const std::uint64_t content = content_hash(tokens.subspan(i * bs, bs));
    if (i > 0) {
      prefix = chain_hash(prefix, content);
    } else {
      prefix = parent ? chain_hash(*parent, content) : content;
    }
    fn(i, prefix);
  }
  return blocks;
}

}  // namespace

std::uint64_t content_hash(std::span<const std::uint32_t> tokens) {
  if constexpr (std::endian::native == std::endian::little) {
    return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), kSeed);
  } else {
    std::vector<std::uint8_t> buf(tokens.size() * 4);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      for (int b = 0; b < 4; ++b) buf[i * 4 + b] = static_cast<std::uint8_t>(tokens[i] >> (8 * b));
    }
    return XXH3_64bits_withSeed(buf.data(), buf.size(), kSeed);
  }
}

std::uint64_t chain_hash(std::uint64_t parent, std::uint64_t content) {
  std::uint8_t buf[16];
  if constexpr (std::endian::native == std::endian::little) {
    // The byte image put_le64 writes, as two stores (its byte loop compiled
    // to ~80 instructions, four times the hash of the 16 bytes).
    std::memcpy(buf, &parent, 8);
    std::memcpy(buf + 8, &content, 8);
  } else {
    put_le64(buf, parent);
    put_le64(buf + 8, content);
  }
  return XXH3_64bits_withSeed(buf, sizeof buf, kSeed);
}

std::vector<std::uint64_t> content_hashes(std::span<const std::uint32_t> tokens,
                                          std::int32_t block_size) {
  std::vector<std::uint64_t> out;
  if (block_size <= 0) return out;
  const std::size_t bs = static_cast<std::size_t>(block_size);
  const std::size_t blocks = tokens.size() / bs;
  out.reserve(blocks);
  for (std::size_t i = 0; i < blocks; ++i) out.push_back(content_hash(tokens.subspan(i * bs, bs)));
  return out;
}

std::vector<std::uint64_t> prefix_hashes(std::span<const std::uint32_t> tokens,
                                         std::int32_t block_size,
                                         std::optional<std::uint64_t> parent) {
  std::vector<std::uint64_t> out;
  if (block_size > 0) out.reserve(tokens.size() / static_cast<std::size_t>(block_size));
  for_each_prefix_hash(tokens, block_size, parent,
                       [&](std::size_t, std::uint64_t h) { out.push_back(h); });
  return out;
}

std::size_t wire_prefix_hashes(std::span<const std::uint32_t> tokens, std::int32_t block_size,
                               std::string& out) {
  out.resize(block_size > 0 ? tokens.size() / static_cast<std::size_t>(block_size) * 8 : 0);
  return for_each_prefix_hash(tokens, block_size, std::nullopt,
                              [&](std::size_t i, std::uint64_t h) {
                                const std::array<std::uint8_t, 8> wire = to_wire(h);
                                std::memcpy(out.data() + i * 8, wire.data(), wire.size());
                              });
}

std::array<std::uint8_t, 8> to_wire(std::uint64_t hash) {
  std::array<std::uint8_t, 8> out{};
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(hash >> (56 - 8 * i));
  return out;
}

std::uint64_t from_wire(std::span<const std::uint8_t, 8> bytes) {
  std::uint64_t v = 0;
  for (std::uint8_t b : bytes) v = (v << 8) | b;
  return v;
}

}  // namespace ic::fingerprint
