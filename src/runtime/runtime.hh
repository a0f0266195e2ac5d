#pragma once
// Thread-per-core runtime: one Reactor (io_uring loop) per core thread, and
// bounded cross-core mailboxes between them. Nothing here is shared mutable
// state on the hot path: cores talk only by posting owned Tasks
// (docs/architecture.md rules 1, 2, 5, 8).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cores.hh"
#include "runtime/task.hh"
#include "runtime/timers.hh"

struct io_uring_sqe;

namespace ic::runtime {

class Reactor;
class BufferRing;

class Runtime;

// Index of the core whose reactor runs on the calling thread. Precondition:
// called on a reactor thread (returns 0 on any other thread).
unsigned current_core();
// The reactor of the calling thread. Precondition: called on a reactor thread.
Reactor& current_reactor();
// Names of the IORING_SETUP_* flags in `flags` the reactor asks for, "|"
// separated ("SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL|CQSIZE"), "none" for 0.
std::string ring_setup_names(unsigned flags);

// The cores of this process (runtime::Cores: the cross-core verb of
// runtime/submit.hh runs on it).
class Runtime final : public Cores {
 public:
  struct Options {
    unsigned cores = 0;                  // 0 = all online CPUs
    std::uint32_t mailbox_depth = 4096;  // tasks in flight per (from, to) pair
    bool pin_threads = true;             // sched_setaffinity each reactor to its CPU
  };

  explicit Runtime(Options options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  unsigned cores() const override;
  Reactor& reactor(unsigned core);

  // ---- Cores (runtime/submit.hh) ----
  // The calling reactor's core; cores() on any other thread (so a submit
  // from there never takes the local fast path).
  unsigned current_core() const override;
  // From a thread that is not one of this runtime's reactors, the task goes
  // through the locked injection queue (never refused).
  bool try_push(unsigned core, Task& task) override;
  // The calling reactor. Precondition: called on a reactor thread.
  Timers& timers() override;
  // Reactor::defer on the calling reactor. Precondition: a reactor thread.
  void defer(Task task) override;

  // Queues `task` to run on `core`'s loop: the control-path primitive for
  // threads that are not reactors (main thread, state saver, tests), where it
  // goes through a locked, unbounded injection queue and always succeeds.
  // Reactor code uses runtime/submit.hh instead. From a reactor thread: a post
  // to the calling core runs at the end of this turn; false (task dropped)
  // when that mailbox is full.
  [[nodiscard]] bool post(unsigned core, Task task);

  // Tasks queued from core `from` to core `to` and not yet run (approximate;
  // for the cross-core queue depth gauge).
  std::uint64_t mailbox_depth(unsigned from, unsigned to) const;

  // Starts the reactor threads; `on_start(core)` runs first on each of them.
  void start(std::function<void(unsigned core)> on_start);
  // Asks every reactor to stop after its current turn; join() waits.
  void stop();
  void join();

 private:
  friend class Reactor;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The per-core event loop. Only its own thread calls its methods.
//
// One loop turn: read clocks; run tasks from the other cores' mailboxes (at
// most `kMailboxBudget` per source); reap io_uring completions (at most
// `kCqeBudget`); fire due timers (at most `kTimerBudget`); run deferred tasks;
// run turn hooks (src/net flushes sessions and starts sends there); wake the
// cores we posted to (IORING_OP_MSG_RING); submit and sleep until a completion
// or the next timer deadline. Budgets bound the work of one turn (rule 2).
class Reactor final : public Timers {
 public:
  static constexpr unsigned kMailboxBudget = 256;
  static constexpr unsigned kCqeBudget = 512;
  static constexpr unsigned kTimerBudget = 256;

  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  unsigned core() const;
  // The runtime this reactor belongs to (to post to other cores).
  Runtime& runtime() const;
  // Monotonic clock in µs (CLOCK_MONOTONIC), read once per loop turn.
  std::int64_t now_us() const override;
  // Wall clock in µs since the Unix epoch (CLOCK_REALTIME), read once per turn.
  std::int64_t wall_us() const;
  // Runs `task` once after `delay_us` (≥ 0) µs. A min-heap of deadlines; the
  // loop sleeps in one io_uring_enter that also submits an io_uring timeout
  // for the earliest. Timers with equal deadlines fire in the order added.
  TimerId add_timer(std::int64_t delay_us, Task task) override;
  // Cancels a pending timer; no-op if it already fired.
  void cancel_timer(TimerId id) override;
  // Runs `task` at the end of the current loop turn (after I/O completions).
  // Tasks deferred by a deferred task run in the next turn (no sleep between).
  void defer(Task task);

  // ---- I/O entry points (used by src/net) ----

  // Receives the completions of the SQEs submitted for its slot. Rule 4: the
  // handler and every buffer its SQEs point at must stay alive until the last
  // of those completions arrived; only then may it unregister and be freed.
  class IoHandler {
   public:
    // `op` is the tag given to prepare(); `res`/`flags` are the CQE's
    // (res < 0 is -errno; flags carry IORING_CQE_F_MORE for multishot).
    virtual void on_completion(std::uint8_t op, std::int32_t res, std::uint32_t flags) = 0;

   protected:
    ~IoHandler() = default;
  };
  // user_data = tag (8 bits) | generation (24 bits) | slot (32 bits), never a
  // bare fd; a completion whose generation no longer matches is dropped.
  using IoSlot = std::uint64_t;

  // Registers a handler; returns its slot for prepare().
  IoSlot register_io(IoHandler& handler);
  // Forgets the slot (late completions for it are dropped).
  void unregister_io(IoSlot slot);
  // An SQE whose completion goes to `slot`'s handler with tag `op`. Never
  // null: when the submission queue is full it is submitted first.
  io_uring_sqe* prepare(IoSlot slot, std::uint8_t op);
  // An SQE whose completion is ignored (cancels, fire-and-forget closes).
  io_uring_sqe* prepare_untracked();
  // This core's shared receive buffers (runtime/buffer_ring.hh: 256 × 16 KiB,
  // buffer group 0) for recv SQEs with IOSQE_BUFFER_SELECT, or nullptr when
  // the kernel has no provided buffer rings (use a buffer of your own then).
  BufferRing* recv_buffers();

  // Runs `hook` at the end of every turn, after deferred tasks.
  void add_turn_hook(std::function<void()> hook);
  // Runs `hook` on this thread once the loop stopped, before in-flight I/O is
  // drained and the ring torn down (src/net aborts its sockets there).
  void add_stop_hook(std::function<void()> hook);
  // Handlers still registered (for tests and the stop drain).
  std::size_t io_registered() const;
  // The IORING_SETUP_* flags the ring was created with: the newest set the
  // kernel accepted (reactor.cc init_ring); 0 before the reactor started.
  unsigned ring_setup_flags() const;

 private:
  friend class Runtime;
  struct Impl;
  Reactor(Runtime& runtime, unsigned core);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ic::runtime
