#pragma once
// Chunked slab of fixed-size records addressed by uint32 index: growth never
// moves records and never doubles memory (chunks of 4096), freed slots are
// reused LIFO. Records carry their own liveness; the slab only hands out slots.

#include <cstdint>
#include <memory>
#include <vector>

namespace ic::index::detail {

template <class T>
class Slab {
 public:
  static constexpr std::uint32_t kChunkBits = 12;
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;

  // A free slot index (its record is default-initialized storage to overwrite).
  std::uint32_t allocate() {
    if (!free_.empty()) {
      const std::uint32_t i = free_.back();
      free_.pop_back();
      return i;
    }
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return size_++;
  }
  void free(std::uint32_t i) { free_.push_back(i); }

  T& operator[](std::uint32_t i) { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  const T& operator[](std::uint32_t i) const { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  // Slots ever handed out: iterate [0, high_water()) and skip dead records.
  std::uint32_t high_water() const { return size_; }
  std::size_t live() const { return size_ - free_.size(); }
  std::size_t memory_bytes() const {
    return chunks_.size() * kChunk * sizeof(T) + chunks_.capacity() * sizeof(void*) +
           free_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::vector<std::uint32_t> free_;
  std::uint32_t size_ = 0;
};

}  // namespace ic::index::detail
