#pragma once
// Bounded single-producer single-consumer ring: the mailbox between one pair
// of cores (docs/architecture.md rules 1 and 5). Lock-free; the producer and the
// consumer indices live on separate cache lines so the two cores do not
// false-share. Capacity is rounded up to a power of two.

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace ic::runtime {

template <typename T>
class SpscRing {
 public:
  // `capacity` ≥ 1 items; rounded up to the next power of two.
  explicit SpscRing(std::uint32_t capacity)
      : mask_(std::bit_ceil(capacity < 1 ? 1u : capacity) - 1),
        slots_(std::make_unique<T[]>(std::size_t{mask_} + 1)) {}

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer side. Moves `item` in and returns true, or returns false (item
  // untouched) when the ring holds capacity() items.
  bool try_push(T& item) {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail - head_cache_ > mask_) return false;
    }
    slots_[tail & mask_] = std::move(item);
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer side. Moves the oldest item into `out` and returns true, or
  // returns false when empty.
  bool try_pop(T& out) {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head == tail_cache_) return false;
    }
    out = std::move(slots_[head & mask_]);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Items the ring can hold.
  std::uint32_t capacity() const { return mask_ + 1; }
  // Items queued now; exact only when called by producer or consumer while the
  // other side is quiet (metrics read it as an approximate queue depth).
  std::uint64_t size_approx() const {
    return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
  }

 private:
  const std::uint32_t mask_;
  std::unique_ptr<T[]> slots_;
  alignas(64) std::atomic<std::uint64_t> head_{0};  // consumer writes
  std::uint64_t tail_cache_ = 0;                    // consumer's view of tail_
  alignas(64) std::atomic<std::uint64_t> tail_{0};  // producer writes
  std::uint64_t head_cache_ = 0;                    // producer's view of head_
};

}  // namespace ic::runtime
