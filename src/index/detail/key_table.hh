#pragma once
// Flat open-addressing hash table (linear probing, backward-shift deletion)
// from a 64-bit hash of (tenant, model, prefix hash bytes) to the keys with
// that hash: 5 bytes per slot (the key id and an 8-bit tag of its hash, in two
// arrays), load ≤ 3/4, no allocation per probe. The caller owns the key
// records: it supplies equality (called only where the tag matches, so a probe
// for an absent key rarely reads a key record), and the hash of a stored key
// when slots move (erase, growth). Keys of one group
// (same tenant, model and bytes, other schemes or adapters) hash alike and so
// sit in one probe run.
//
// The slot count is not a power of two: it grows by 1.5× and a hash's home is
// (low 32 bits × slots) >> 32 (Lemire's multiply-shift range reduction), so the
// table stays between 1/2 and 3/4 full: 6.7-10 bytes per key.

#include <cstdint>
#include <vector>

namespace ic::index::detail {

class KeyTable {
 public:
  KeyTable() {
    slots_.resize(16);
    tags_.resize(16);
  }

  // The first key of `h`'s probe run for which eq(key) holds, or kNoKey; then,
  // if `hole` is set, the empty slot that ended the run goes there (where
  // insert_at() places a key of `h`). Only slots whose tag is `h`'s call eq.
  template <class Eq>
  std::uint32_t find(std::uint64_t h, Eq&& eq, std::size_t* hole = nullptr) const {
    const std::uint8_t t = tag(h);
    for (std::size_t i = home(h);; i = after(i)) {
      const std::uint32_t s = slots_[i];
      if (s == 0) {
        if (hole != nullptr) *hole = i;
        return kNoKey;
      }
      if (tags_[i] == t && eq(s - 1)) return s - 1;
    }
  }
  // Calls fn(key) for every key of `h`'s probe run with `h`'s tag (a
  // superset of the keys with hash `h`); fn must not change the table.
  template <class Fn>
  void for_each_in_run(std::uint64_t h, Fn&& fn) const {
    const std::uint8_t t = tag(h);
    for (std::size_t i = home(h); slots_[i] != 0; i = after(i)) {
      if (tags_[i] == t) fn(slots_[i] - 1);
    }
  }
  // Hints the cache about the home slot of `h` (lookups walking a chain
  // prefetch the next block's slot while matching the current one).
  void prefetch(std::uint64_t h) const {
    const std::size_t i = home(h);
    __builtin_prefetch(&slots_[i]);
    __builtin_prefetch(&tags_[i]);
  }
  // Calls fn(key) for the keys with `h`'s tag among the first `max` slots of
  // its probe run: the caller prefetches their records (at once, so the misses
  // overlap) once prefetch(h) has had time to land.
  template <class Fn>
  void prefetch_run(std::uint64_t h, int max, Fn&& fn) const {
    const std::uint8_t t = tag(h);
    for (std::size_t i = home(h); max-- > 0 && slots_[i] != 0; i = after(i)) {
      if (tags_[i] == t) fn(slots_[i] - 1);
    }
  }
  // Adds `key` (the caller checked it is absent). When the table is full it
  // grows first: each_key(put) must call put(hash, key) for every stored key
  // (in key order: the caller's records are read sequentially, not by slot).
  template <class EachKey>
  void insert(std::uint64_t h, std::uint32_t key, EachKey&& each_key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow(each_key);
    place(h, key + 1);
    ++size_;
  }
  // insert() of a key find() just missed, at the `hole` it gave, the table
  // unchanged since: the run is not walked again (unless the table grows).
  template <class EachKey>
  void insert_at(std::uint64_t h, std::uint32_t key, std::size_t hole, EachKey&& each_key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) {
      insert(h, key, each_key);
      return;
    }
    slots_[hole] = key + 1;
    tags_[hole] = tag(h);
    ++size_;
  }
  // Removes `key`, whose hash is `h`; hash_of(k) = the hash of stored key k
  // (for the keys the backward shift may move).
  template <class HashOf>
  void erase(std::uint64_t h, std::uint32_t key, HashOf&& hash_of) {
    std::size_t hole = home(h);
    while (slots_[hole] != key + 1) hole = after(hole);
    // Backward shift: pull later entries of the cluster into the hole when
    // their home position allows it, so probes never need tombstones.
    for (std::size_t j = after(hole);; j = after(j)) {
      const std::uint32_t s = slots_[j];
      if (s == 0) break;
      if (distance(home(hash_of(s - 1)), j) >= distance(hole, j)) {
        slots_[hole] = s;
        tags_[hole] = tags_[j];
        hole = j;
      }
    }
    slots_[hole] = 0;
    --size_;
  }
  std::size_t size() const { return size_; }
  std::size_t memory_bytes() const {
    return slots_.capacity() * sizeof(std::uint32_t) + tags_.capacity();
  }

  static constexpr std::uint32_t kNoKey = UINT32_MAX;

 private:
  // Home slot of `h`: its low 32 bits scaled into [0, slots).
  std::size_t home(std::uint64_t h) const {
    return static_cast<std::size_t>(
        (std::uint64_t{static_cast<std::uint32_t>(h)} * slots_.size()) >> 32);
  }
  // The tag: the hash's top 8 bits (the home uses the low 32).
  static std::uint8_t tag(std::uint64_t h) { return static_cast<std::uint8_t>(h >> 56); }
  std::size_t after(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
  // Slots from `from` forward to `to`, wrapping.
  std::size_t distance(std::size_t from, std::size_t to) const {
    return to >= from ? to - from : to + slots_.size() - from;
  }
  // Re-places every key (each_key as for insert) in a table 1.5× larger. The
  // keys come in key order and land at random slots: each home slot is
  // prefetched kGrowAhead keys before it is written, so the misses overlap
  // (without, the rehash was a quarter of building a 1,000,000-key index).
  // The keys are placed in the same order either way: the same layout.
  template <class EachKey>
  void grow(EachKey&& each_key) {
    constexpr std::size_t kGrowAhead = 16;
    slots_.assign(slots_.size() + slots_.size() / 2, 0);
    tags_.assign(slots_.size(), 0);
    std::uint64_t hashes[kGrowAhead];
    std::uint32_t keys[kGrowAhead];
    std::size_t n = 0;
    each_key([&](std::uint64_t kh, std::uint32_t k) {
      const std::size_t at = n % kGrowAhead;
      if (n >= kGrowAhead) place(hashes[at], keys[at] + 1);
      prefetch(kh);
      hashes[at] = kh;
      keys[at] = k;
      ++n;
    });
    for (std::size_t j = n > kGrowAhead ? n - kGrowAhead : 0; j < n; ++j)
      place(hashes[j % kGrowAhead], keys[j % kGrowAhead] + 1);
  }
  void place(std::uint64_t h, std::uint32_t key_plus1) {
    std::size_t i = home(h);
    while (slots_[i] != 0) i = after(i);
    slots_[i] = key_plus1;
    tags_[i] = tag(h);
  }
  // key id + 1; 0 = empty.
  std::vector<std::uint32_t> slots_;
  std::vector<std::uint8_t> tags_;  // tag(hash) of the key in the same slot
  std::size_t size_ = 0;
};

}  // namespace ic::index::detail
