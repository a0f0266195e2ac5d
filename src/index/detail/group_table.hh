#pragma once
// Chained hash table from a 64-bit hash of (tenant, model, prefix hash bytes)
// to the keys of that hash: one uint32 bucket head per bucket, the chain
// linked through KeyRec::next_in_bucket (the key records own the links, so the
// table itself is 4 bytes per bucket). Load ≤ 1 key per bucket (power-of-two
// bucket count, doubled past it): ≤ 8 bytes per key, 4.2 at 1,000,000 keys.
// The keys of one group (same tenant, model and hash bytes) are one run of
// their bucket's chain: a new group is linked at the bucket's head, a new key
// of a known group right after the group's first key, and a rehash keeps the
// order (docs/index.md "Keys": PREFIX_EVICTED is one probe).

#include <cstdint>
#include <vector>

namespace ic::index::detail {

class GroupTable {
 public:
  static constexpr std::uint32_t kEmpty = UINT32_MAX;

  GroupTable() { heads_.assign(16, kEmpty); }

  // The first key of the bucket of `h` (kEmpty: none); the caller walks the
  // chain and compares its key records.
  std::uint32_t head(std::uint64_t h) const { return heads_[h & mask_]; }
  std::uint32_t& head(std::uint64_t h) { return heads_[h & mask_]; }
  // Hints the cache about the bucket of `h` (lookups walking a chain prefetch
  // the next block's bucket while matching the current one).
  void prefetch(std::uint64_t h) const { __builtin_prefetch(&heads_[h & mask_]); }

  // Counts one more key; true when the load passed 1 key per bucket and the
  // caller must rehash: grow(), then split every old bucket's chain.
  bool add() { return ++size_ > heads_.size(); }
  void remove() { --size_; }
  // Doubles the bucket count; returns the old count n. Old bucket b's keys
  // belong to b or b + n now: the caller relinks each of its chains.
  std::size_t grow() {
    const std::size_t n = heads_.size();
    heads_.resize(2 * n, kEmpty);
    mask_ = 2 * n - 1;
    return n;
  }
  // Bucket i's head, for the rehash.
  std::uint32_t& bucket(std::size_t i) { return heads_[i]; }

  std::size_t size() const { return size_; }
  std::size_t buckets() const { return heads_.size(); }
  std::size_t memory_bytes() const { return heads_.capacity() * sizeof(std::uint32_t); }

 private:
  std::vector<std::uint32_t> heads_;
  std::size_t mask_ = 15;
  std::size_t size_ = 0;
};

}  // namespace ic::index::detail
