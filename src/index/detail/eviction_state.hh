#pragma once
// Eviction and expiry state of one shard (part of Shard::Impl): the cap
// victims (evict.cc), the cross-shard slot (global_cap.cc), the quota flag
// and the TTL sweep cursor (expiry.cc).

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "index/shard.hh"

namespace ic::index::detail {

// One cap-victim candidate: snapshot of an entry's order key.
struct VictimRec {
  std::uint32_t entry;
  std::uint16_t gen;
  std::uint32_t a;  // access_count on LFU, else 0
  std::int64_t last_seen;
};

// Keeps in `heap` (a max-heap under `less`) the `k` smallest values offered.
template <typename T, typename Less>
void keep_smallest(std::vector<T>& heap, const T& v, std::size_t k, Less less) {
  if (heap.size() < k) {
    heap.push_back(v);
    std::push_heap(heap.begin(), heap.end(), less);
  } else if (!heap.empty() && less(v, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), less);
    heap.back() = v;
    std::push_heap(heap.begin(), heap.end(), less);
  }
}

struct EvictionState {
  EvictionCounters evictions;
  std::unordered_map<std::string, std::uint64_t> tenant_evictions;
  // Cap victims (evict.cc): a min-heap by coarse order (a, last_seen, entry)
  // holding every entry whose coarse order is ≤ `threshold`, plus `group`: the
  // records of the smallest coarse value, sorted by the full order.
  std::vector<VictimRec> victims;
  std::vector<VictimRec> group;
  std::size_t group_pos = 0;
  bool victims_valid = false;
  VictimRec threshold{};
  bool quota_evicting = false;     // removals by the quota keep its victim list
  int slot = -1;                   // IndexGlobals::oldest slot, -1 = none
  std::uint32_t sweep_cursor = 0;  // TTL sweep (expiry.cc): next entry slot
};

}  // namespace ic::index::detail
