#pragma once
// Private state of a Reactor and of a Runtime, shared by reactor.cc and
// runtime.cc only (not part of the public contract in runtime.hh).

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/buffer_ring.hh"
#include "runtime/runtime.hh"
#include "runtime/spsc_ring.hh"
#include "runtime/timer_heap.hh"

namespace ic::runtime {

// Reserved user_data values; I/O slots always encode a non-zero generation in
// bits 32..55, so they never collide with these.
inline constexpr std::uint64_t kUntrackedUserData = 0;
inline constexpr std::uint64_t kWakeUserData = 1;   // IORING_OP_MSG_RING from a peer core
inline constexpr std::uint64_t kEventUserData = 2;  // eventfd read (external posts, stop)
// Moving the sleep timeout earlier (IORING_OP_TIMEOUT_REMOVE with
// IORING_TIMEOUT_UPDATE); its CQE only comes on failure.
inline constexpr std::uint64_t kTimeoutUpdateUserData = 3;
// A MSG_RING we sent to core (user_data - kWakeSentBase); its CQE only comes
// on failure (IOSQE_CQE_SKIP_SUCCESS).
inline constexpr std::uint64_t kWakeSentBase = 1024;
// The sleep timeout armed (kTimeoutBase + sequence number & kTimeoutSeqMask);
// above every kWakeSentBase + core.
inline constexpr std::uint64_t kTimeoutBase = 1u << 24;
inline constexpr std::uint64_t kTimeoutSeqMask = (1u << 24) - 1;

struct Reactor::Impl {
  Impl(Runtime& rt, unsigned core_index);
  ~Impl();

  // Creates the ring; called on the reactor's own thread (SINGLE_ISSUER).
  void init_ring();
  void exit_ring();
  // The event loop until stop; then stop hooks and the I/O drain.
  void run();
  // One loop turn; `may_sleep` false only while draining at exit.
  void turn(bool may_sleep);
  void read_clocks();
  bool drain_mailboxes();
  // Clears the wake flag and reports whether nothing arrived meanwhile.
  bool ready_to_sleep();
  bool drain_external();
  bool reap_completions();
  bool fire_timers();
  bool run_deferred();
  void send_wakeups();
  void wait(bool more_work);
  // Makes the armed sleep timeout fire by `deadline_us` (CLOCK_MONOTONIC):
  // arms one, or moves the armed one earlier; a later one is left as is.
  void arm_sleep_timeout(std::int64_t deadline_us);
  // The CQE of the sleep timeout or of its update.
  void on_timeout_cqe(std::uint64_t user_data, std::int32_t res);
  void dispatch(std::uint64_t user_data, std::int32_t res, std::uint32_t flags);
  void arm_event_read();
  io_uring_sqe* get_sqe();

  // Marks `target` to be woken at the end of this turn (coalesced).
  void note_wake(unsigned target);
  // Called by another thread: queue a task through the locked path and wake.
  void post_external(Task task);
  void request_stop();
  // Wakes this reactor from any thread (eventfd write).
  void kick();

  Runtime& runtime;
  unsigned core;
  io_uring ring{};
  bool ring_ready = false;
  unsigned ring_flags = 0;                   // IORING_SETUP_* the ring was created with
  std::unique_ptr<BufferRing> recv_buffers;  // null when unsupported
  int event_fd = -1;
  std::uint64_t event_buf = 0;

  std::int64_t now_us = 0;
  std::int64_t wall_us = 0;

  // The one io_uring timeout that bounds a sleep while timers are pending
  // (DEFER_TASKRUN rings): armed once and moved only when an earlier timer
  // comes, so a wake-up does not also submit and reap a timeout.
  bool single_timeout = false;
  std::int64_t timeout_at = 0;  // its deadline, 0 when none is armed
  std::uint64_t timeout_seq = 0;
  // The timespec its SQE points at. The kernel copies it when the SQE is
  // submitted (in the io_uring_enter of the sleep), after the function that
  // prepared the SQE returned: it must outlive that frame.
  __kernel_timespec timeout_ts{};

  std::vector<Task> deferred;
  std::vector<Task> running;
  TimerHeap timers;

  struct IoEntry {
    IoHandler* handler = nullptr;
    std::uint32_t generation = 1;
  };
  std::vector<IoEntry> io;
  std::vector<std::uint32_t> io_free;
  std::size_t io_count = 0;

  std::vector<std::function<void()>> turn_hooks;
  std::vector<std::function<void()>> stop_hooks;

  std::vector<unsigned> wake_targets;
  std::vector<std::uint8_t> wake_marked;

  // Set by a peer that sent us a MSG_RING wake, cleared by us right before
  // we sleep (ready_to_sleep): at most one wake in flight per target.
  alignas(64) std::atomic<bool> notified{false};
  alignas(64) std::mutex external_mu;
  std::vector<Task> external;
  std::atomic<bool> external_pending{false};
  std::atomic<bool> stop_requested{false};
};

struct Runtime::Impl {
  explicit Impl(Options opts);

  SpscRing<Task>& box(unsigned from, unsigned to) { return *mailboxes[from * n + to]; }
  void thread_main(unsigned core, const std::function<void(unsigned)>& on_start);

  Options options;
  unsigned n;
  std::vector<int> cpus;  // CPU to pin core i to: cpus[i % cpus.size()]
  std::vector<std::unique_ptr<Reactor>> reactors;
  std::vector<std::unique_ptr<SpscRing<Task>>> mailboxes;  // [from * n + to]
  std::vector<std::thread> threads;
  std::unique_ptr<std::latch> rings_ready;
};

}  // namespace ic::runtime
