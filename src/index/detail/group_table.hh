#pragma once
// Flat open-addressing hash table (linear probing, backward-shift deletion)
// from a 64-bit hash of (tenant, model, prefix hash bytes) to the first key of
// that group. 8 bytes per slot, load ≤ 3/4, no allocation per probe. The
// caller supplies equality (it owns the key records).

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
    for (std::size_t i = tag & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_plus1 == 0) return kNoKey;
      if (s.tag == tag && eq(s.key_plus1 - 1)) return s.key_plus1 - 1;
    }
  }
  // Hints the cache about the home slot of `h` (lookups walking a chain
  // prefetch the next block's slot while matching the current one).
  void prefetch(std::uint64_t h) const {
    __builtin_prefetch(&slots_[static_cast<std::uint32_t>(h) & mask_]);
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
    for (std::size_t i = tag & mask_;; i = (i + 1) & mask_) {
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
    for (std::size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
      Slot& s = slots_[j];
      if (s.key_plus1 == 0) break;
      const std::size_t home = s.tag & mask_;
      const bool movable = ((j - home) & mask_) >= ((j - hole) & mask_);
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
    std::uint32_t tag = 0;        // low 32 bits of the hash (home = tag & mask)
  };

  std::size_t slot_of(std::uint64_t h, std::uint32_t key) const {
    const std::uint32_t tag = static_cast<std::uint32_t>(h);
    for (std::size_t i = tag & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key_plus1 == key + 1) return i;
    }
  }
  void place(std::uint32_t tag, std::uint32_t key_plus1) {
    std::size_t i = tag & mask_;
    while (slots_[i].key_plus1 != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{key_plus1, tag};
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key_plus1 != 0) place(s.tag, s.key_plus1);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 15;
  std::size_t size_ = 0;
};

}  // namespace ic::index::detail
