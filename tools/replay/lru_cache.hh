// The simulated engine's KV cache: a fixed number of blocks, least-recently-used eviction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace ic::tools::replay {

class LruBlockCache {
 public:
  // `capacity_blocks` >= 1: the most KV blocks the replica holds at once.
  explicit LruBlockCache(std::size_t capacity_blocks);

  // The engine's prefix hit: how many LEADING blocks of `blocks` are cached (stops at the first
  // miss). Does not change recency.
  std::size_t leading_hits(std::span<const std::uint64_t> blocks) const;

  // Stores every block of a served request in order: a cached block becomes most recent, a new
  // one is inserted; whenever the cache exceeds capacity the least recent block is evicted and
  // appended to *evicted (which may then include earlier blocks of this very request when it is
  // longer than the capacity).
  void store(std::span<const std::uint64_t> blocks, std::vector<std::uint64_t>* evicted);

  // True when `block` is cached (no recency change).
  bool contains(std::uint64_t block) const { return index_.contains(block); }
  // Cached blocks, <= capacity().
  std::size_t size() const { return index_.size(); }
  // Most blocks held at once.
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::list<std::uint64_t> order_;  // front = most recent
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> index_;
};

}  // namespace ic::tools::replay
