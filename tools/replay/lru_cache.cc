#include "replay/lru_cache.hh"

#include <algorithm>

namespace ic::tools::replay {

LruBlockCache::LruBlockCache(std::size_t capacity_blocks)
    : capacity_(std::max<std::size_t>(capacity_blocks, 1)) {
  index_.reserve(capacity_ + 1);
}

std::size_t LruBlockCache::leading_hits(std::span<const std::uint64_t> blocks) const {
  std::size_t run = 0;
  while (run < blocks.size() && index_.contains(blocks[run])) ++run;
  return run;
}

void LruBlockCache::store(std::span<const std::uint64_t> blocks,
                          std::vector<std::uint64_t>* evicted) {
  for (auto block : blocks) {
    auto it = index_.find(block);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      continue;
    }
    order_.push_front(block);
    index_.emplace(block, order_.begin());
    if (index_.size() > capacity_) {
      const auto victim = order_.back();
      order_.pop_back();
      index_.erase(victim);
      evicted->push_back(victim);
    }
  }
}

}  // namespace ic::tools::replay
