#pragma once
// One figure of a stats block (persist/stats.hh, replication/stats.hh):
// written and read by several threads, each value standing alone, so relaxed
// atomics. Copying one is a relaxed load, so copying a block of them is the
// plain copy a scrape renders.

#include <atomic>

namespace ic::metrics {

template <typename T>
class Relaxed {
 public:
  Relaxed() = default;
  // The figure's value before its first store.
  constexpr Relaxed(T initial) : value_(initial) {}  // NOLINT(google-explicit-constructor)
  Relaxed(const Relaxed& other) : value_(other.load()) {}
  Relaxed& operator=(const Relaxed& other) {
    store(other.load());
    return *this;
  }

  // The value now (relaxed); the conversion reads it where a T is wanted.
  T load() const { return value_.load(std::memory_order_relaxed); }
  operator T() const { return load(); }  // NOLINT(google-explicit-constructor)
  // Replaces the value (relaxed).
  void store(T value) { value_.store(value, std::memory_order_relaxed); }
  // Adds `n` (relaxed; integer and floating-point T only).
  void add(T n) { value_.fetch_add(n, std::memory_order_relaxed); }

 private:
  std::atomic<T> value_{};
};

}  // namespace ic::metrics
