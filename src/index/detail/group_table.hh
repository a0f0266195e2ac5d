#pragma once
// Flat open-addressing hash table (linear probing, backward-shift deletion)
// from a 64-bit hash of (tenant, model, prefix hash bytes) to the first key of
// that group. 8 bytes per slot, load ≤ 3/4, no allocation per probe. The
// caller supplies equality (it owns the key records).
//
// The slot count is not a power of two: it grows by 1.5× and a tag's home is
// (tag × slots) >> 32 (Lemire's multiply-shift range reduction), so the table
// stays between 1/2 and 3/4 full: 10.7-16 bytes per group where doubling left
// 10.7-21 (16.8 at 1,000,000 one-replica keys, a fifth of an entry's bytes).

#include <cstdint>
#include <vector>

namespace ic::index::detail {

class GroupTable {
 public:
  GroupTable() { slots_.resize(16); }

  // Key index of the group whose hash is `h` and for which eq(key) holds, or
  // kNoKey. Only slots with the same 32-bit tag call eq.
  template <class Eq>
  std::uint32_t find(std::uint64_t h, Eq&& eq) const {
    const std::uint32_t tag = static_cast<std::uint32_t>(h);
    for (std::size_t i = home(tag);; i = after(i)) {
      const Slot& s = slots_[i];
      if (s.key_plus1 == 0) return kNoKey;
      if (s.tag == tag && eq(s.key_plus1 - 1)) return s.key_plus1 - 1;
    }
  }
  // Hints the cache about the home slot of `h` (lookups walking a chain
  // prefetch the next block's slot while matching the current one).
  void prefetch(std::uint64_t h) const {
    __builtin_prefetch(&slots_[home(static_cast<std::uint32_t>(h))]);
  }
  // Adds a group head (the caller checked it is absent).
  void insert(std::uint64_t h, std::uint32_t key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    place(static_cast<std::uint32_t>(h), key + 1);
    ++size_;
  }
  // True when `key` is the head stored for hash `h`.
  bool is_head(std::uint64_t h, std::uint32_t key) const {
    const std::uint32_t tag = static_cast<std::uint32_t>(h);
    for (std::size_t i = home(tag);; i = after(i)) {
      if (slots_[i].key_plus1 == 0) return false;
      if (slots_[i].key_plus1 == key + 1) return true;
    }
  }
  // The group's head key changes from `old_key` to `new_key`.
  void replace(std::uint64_t h, std::uint32_t old_key, std::uint32_t new_key) {
    slots_[slot_of(h, old_key)].key_plus1 = new_key + 1;
  }
  // Removes the group whose head is `key`.
  void erase(std::uint64_t h, std::uint32_t key) {
    std::size_t hole = slot_of(h, key);
    // Backward shift: pull later entries of the cluster into the hole when
    // their home position allows it, so probes never need tombstones.
    for (std::size_t j = after(hole);; j = after(j)) {
      Slot& s = slots_[j];
      if (s.key_plus1 == 0) break;
      const bool movable = distance(home(s.tag), j) >= distance(hole, j);
      if (movable) {
        slots_[hole] = s;
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
  }
  std::size_t size() const { return size_; }
  std::size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

  static constexpr std::uint32_t kNoKey = UINT32_MAX;

 private:
  struct Slot {
    std::uint32_t key_plus1 = 0;  // 0 = empty
    std::uint32_t tag = 0;        // low 32 bits of the hash (its home: home(tag))
  };

  // Home slot of `tag`: the tag scaled into [0, slots).
  std::size_t home(std::uint32_t tag) const {
    return static_cast<std::size_t>((std::uint64_t{tag} * slots_.size()) >> 32);
  }
  std::size_t after(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
  // Slots from `from` forward to `to`, wrapping.
  std::size_t distance(std::size_t from, std::size_t to) const {
    return to >= from ? to - from : to + slots_.size() - from;
  }
  std::size_t slot_of(std::uint64_t h, std::uint32_t key) const {
    const std::uint32_t tag = static_cast<std::uint32_t>(h);
    for (std::size_t i = home(tag);; i = after(i)) {
      if (slots_[i].key_plus1 == key + 1) return i;
    }
  }
  void place(std::uint32_t tag, std::uint32_t key_plus1) {
    std::size_t i = home(tag);
    while (slots_[i].key_plus1 != 0) i = after(i);
    slots_[i] = Slot{key_plus1, tag};
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() + old.size() / 2, Slot{});
    for (const Slot& s : old) {
      if (s.key_plus1 != 0) place(s.tag, s.key_plus1);
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace ic::index::detail
