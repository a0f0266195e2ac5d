#pragma once
// Thread-per-core runtime: one Reactor (io_uring loop) per core thread, and
// bounded cross-core mailboxes between them. Nothing here is shared mutable
// state on the hot path: cores talk only by posting owned Tasks
// (ARCHITECTURE.md rules 1, 2, 5, 8).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/task.hh"

namespace ic::runtime {

class Reactor;

class Runtime;

// Index of the core whose reactor runs on the calling thread. Precondition:
// called on a reactor thread (returns 0 on any other thread).
unsigned current_core();
// The reactor of the calling thread. Precondition: called on a reactor thread.
Reactor& current_reactor();

class Runtime {
 public:
  struct Options {
    unsigned cores = 0;               // 0 = all online CPUs
    std::uint32_t mailbox_depth = 4096;  // tasks in flight per (from, to) pair
    bool pin_threads = true;          // sched_setaffinity each reactor to its CPU
  };

  explicit Runtime(Options options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  unsigned cores() const;
  Reactor& reactor(unsigned core);

  // Queues `task` to run on `core`'s loop. Callable from any reactor thread of
  // this runtime; a post to the calling core runs at the end of this turn.
  // Returns false (task dropped) when that mailbox is full: the caller sheds
  // load (RESOURCE_EXHAUSTED / UNAVAILABLE) instead of queueing without bound.
  [[nodiscard]] bool post(unsigned core, Task task);

  // Starts the reactor threads; `on_start(core)` runs first on each of them.
  void start(std::function<void(unsigned core)> on_start);
  // Asks every reactor to stop after its current turn; join() waits.
  void stop();
  void join();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The per-core event loop. Only its own thread calls its methods. (The
// implementation adds private state and the I/O entry points src/net needs.)
class Reactor {
 public:
  using TimerId = std::uint64_t;

  unsigned core() const;
  // The runtime this reactor belongs to (to post to other cores).
  Runtime& runtime() const;
  // Monotonic clock in µs (CLOCK_MONOTONIC), read once per loop turn.
  std::int64_t now_us() const;
  // Wall clock in µs since the Unix epoch (CLOCK_REALTIME), read once per turn.
  std::int64_t wall_us() const;
  // Runs `task` once after `delay_us` (≥ 0) µs; io_uring timeouts under the hood.
  TimerId add_timer(std::int64_t delay_us, Task task);
  // Cancels a pending timer; no-op if it already fired.
  void cancel_timer(TimerId id);
  // Runs `task` at the end of the current loop turn (after I/O completions).
  void defer(Task task);
};

}  // namespace ic::runtime
