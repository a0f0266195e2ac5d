#pragma once
// Log lines of a repeated replication event (docs/replication.md "When NATS is
// slow or away"): the first at once, the next only after a backoff.

#include <cstdint>
#include <mutex>

namespace ic::replication {

// One line for an event now, the next one only `first_us` later, then after
// twice the previous wait, up to `max_us` (µs). After a quiet stretch as long
// as the current wait (no event between the allowed time and that much later)
// it starts over from `first_us`. Events in between are counted and reported
// with the next line. Thread-safe (NATS callbacks and the replication thread).
class LogBackoff {
 public:
  LogBackoff(std::int64_t first_us, std::int64_t max_us) : first_us_(first_us), max_us_(max_us) {}

  // True when a line may be written at `now_us` (monotonic µs, e.g.
  // base::log_clock_us()); then `*suppressed` is the number of events
  // swallowed since the last line and `*next_in_us` (may be null) the wait
  // before the next line may go out.
  bool allow(std::int64_t now_us, std::uint64_t* suppressed, std::int64_t* next_in_us = nullptr);
  // Forgets the history: the next event is logged at once, waits from first_us.
  void restart();

 private:
  const std::int64_t first_us_;
  const std::int64_t max_us_;
  std::mutex mutex_;
  std::int64_t wait_us_ = 0;  // current wait (0: nothing logged yet)
  std::int64_t next_us_ = 0;  // earliest time of the next line
  std::uint64_t suppressed_ = 0;
};

}  // namespace ic::replication
