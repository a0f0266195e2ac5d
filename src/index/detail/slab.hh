#pragma once
// Slab of fixed-size records addressed by uint32 index, contiguous so that a
// hop along an index-linked list is a single dependent load (the chain walk of
// a lookup is latency-bound on these hops). Freed slots are reused LIFO.
// Growth reallocates (records are trivially copyable and only referenced by
// index); capacity beyond the live records is untouched virtual memory.

#include <cstdint>
#include <type_traits>
#include <vector>

namespace ic::index::detail {

// A free slot of `recs` (reused LIFO from `free`, else appended), as an id.
template <typename Rec>
std::uint32_t take_slot(std::vector<Rec>& recs, std::vector<std::uint32_t>& free) {
  if (free.empty()) {
    recs.emplace_back();
    return static_cast<std::uint32_t>(recs.size() - 1);
  }
  const std::uint32_t id = free.back();
  free.pop_back();
  return id;
}

template <class T>
class Slab {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  // A free slot index; the caller overwrites its record. May reallocate:
  // references into the slab do not survive this call.
  std::uint32_t allocate() { return take_slot(records_, free_); }
  // allocate(), with the record reset to T{} except its `gen` (records that
  // count their reuses so stale references to a slot can be told apart).
  std::uint32_t allocate_fresh() {
    const std::uint32_t i = allocate();
    T& r = records_[i];
    const auto gen = r.generation();
    r = T{};
    r.generation() = gen;
    return i;
  }
  void free(std::uint32_t i) { free_.push_back(i); }

  T& operator[](std::uint32_t i) { return records_[i]; }
  const T& operator[](std::uint32_t i) const { return records_[i]; }
  // The records as an array (a hot loop keeps this in a register; valid until
  // the next allocate).
  const T* data() const { return records_.data(); }
  // Slots ever handed out: iterate [0, high_water()) and skip dead records.
  std::uint32_t high_water() const { return static_cast<std::uint32_t>(records_.size()); }
  std::size_t live() const { return records_.size() - free_.size(); }
  // Bytes of records and free list actually in use (not reserved capacity).
  std::size_t memory_bytes() const {
    return records_.size() * sizeof(T) + free_.size() * sizeof(std::uint32_t);
  }

 private:
  std::vector<T> records_;
  std::vector<std::uint32_t> free_;
};

}  // namespace ic::index::detail
