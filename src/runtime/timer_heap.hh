#pragma once
// The per-core timer set: a binary min-heap of (deadline µs, sequence) over a
// slot table with generations. The reactor sleeps in io_uring until the
// earliest deadline (one EXT_ARG timeout per wait), then fires what is due.
// Equal deadlines fire in the order they were added. Cancel is O(1): the heap
// entry goes stale and is skipped (and compacted when stale ones dominate).

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/task.hh"

namespace ic::runtime {

class TimerHeap {
 public:
  // Opaque id: slot index (low 32 bits) + generation (high 32). Never 0.
  using Id = std::uint64_t;

  // Schedules `task` at `deadline_us` (monotonic µs).
  Id add(std::int64_t deadline_us, Task task);
  // Drops a pending timer; false when it already fired or was cancelled.
  bool cancel(Id id);
  // Earliest pending deadline in µs, if any.
  std::optional<std::int64_t> next_deadline();
  // Removes and returns the earliest timer due at `now_us` (deadline ≤ now),
  // or an empty Task when none is due.
  Task pop_due(std::int64_t now_us);
  // Timers pending (not fired, not cancelled).
  std::size_t size() const { return live_; }

 private:
  struct Entry {
    std::int64_t deadline_us;
    std::uint64_t seq;
    Id id;
  };
  struct Slot {
    Task task;
    std::uint32_t generation = 1;
    bool armed = false;
  };
  static bool later(const Entry& a, const Entry& b) {
    return a.deadline_us != b.deadline_us ? a.deadline_us > b.deadline_us : a.seq > b.seq;
  }
  bool live(const Entry& e) const;
  void drop_stale_top();
  void compact();
  void release(std::uint32_t slot);

  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::uint64_t seq_ = 0;
  std::size_t live_ = 0;
};

}  // namespace ic::runtime
