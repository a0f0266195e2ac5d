#pragma once
// What the cross-core verb (runtime/submit.hh) needs from a set of cores:
// their count, the calling core, one bounded mailbox per (calling core,
// target core) and the calling core's timers. runtime::Runtime implements it;
// service unit tests implement it with a single-threaded, hand-run fake.

#include <cstdint>

#include "runtime/task.hh"
#include "runtime/timers.hh"

namespace ic::runtime {

class Cores {
 public:
  virtual ~Cores() = default;
  // Number of cores (≥ 1).
  virtual unsigned cores() const = 0;
  // Index of the calling core.
  virtual unsigned current_core() const = 0;
  // Moves `task` into the (calling core → `core`) mailbox and returns true, or
  // returns false with `task` untouched when that mailbox is full (its depth
  // is the bound per target core). Precondition: `core` != current_core().
  [[nodiscard]] virtual bool try_push(unsigned core, Task& task) = 0;
  // The calling core's timers (for retries and deadlines).
  virtual Timers& timers() = 0;
  // Runs `task` on the calling core at the end of its current turn.
  virtual void defer(Task task) = 0;
};

}  // namespace ic::runtime
