#pragma once
// Private state of a Reactor and of a Runtime, shared by reactor.cc,
// runtime.cc and the two backends (not part of the public contract in
// runtime.hh).

#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend_epoll.hh"
#include "runtime/backend_uring.hh"
#include "runtime/runtime.hh"
#include "runtime/spsc_ring.hh"
#include "runtime/timer_heap.hh"

namespace ic::runtime {

inline constexpr std::uint64_t kSlotMask = 0xffffffffull;
inline constexpr std::uint32_t kGenerationMask = 0xffffffu;

// The completion key of operation `op` of I/O slot (`slot`, `generation`).
inline std::uint64_t encode_key(std::uint64_t slot_id, std::uint8_t op) {
  const auto slot = static_cast<std::uint32_t>(slot_id & kSlotMask);
  const auto generation = static_cast<std::uint32_t>(slot_id >> 32);
  return (std::uint64_t{op} << 56) | (std::uint64_t{generation & kGenerationMask} << 32) | slot;
}

struct Reactor::Impl {
  Impl(Runtime& rt, unsigned core_index);
  ~Impl();

  // Sets up `kind` on the reactor's own thread; "" or why it failed.
  std::string init_backend(Backend kind);
  // The event loop until stop; then stop hooks and the I/O drain.
  void run();
  // The loop, compiled once per backend (no indirect call per completion).
  template <typename B>
  void run_on(B& b);
  // One loop turn; `may_sleep` false only while draining at exit.
  template <typename B>
  void turn(B& b, bool may_sleep);
  void read_clocks();
  bool drain_mailboxes();
  // Clears the wake flag and reports whether nothing arrived meanwhile.
  bool ready_to_sleep();
  bool drain_external();
  bool fire_timers();
  bool run_deferred();
  template <typename B>
  void send_wakeups(B& b);

  // A completion for an I/O slot, from either backend: to its handler unless
  // the slot was unregistered (or reused) meanwhile.
  void complete(std::uint64_t key, std::int32_t res, std::uint32_t flags) {
    const auto slot = static_cast<std::uint32_t>(key & kSlotMask);
    const auto generation = static_cast<std::uint32_t>((key >> 32) & kGenerationMask);
    const auto op = static_cast<std::uint8_t>(key >> 56);
    if (slot >= io.size()) return;
    IoEntry& entry = io[slot];
    if (entry.handler == nullptr || entry.generation != generation) return;
    entry.handler->on_completion(op, res, flags);
  }

  // Marks `target` to be woken at the end of this turn (coalesced).
  void note_wake(unsigned target);
  // Called by another thread: queue a task through the locked path and wake.
  void post_external(Task task);
  void request_stop();
  // Wakes this reactor from any thread (eventfd write).
  void kick();

  Runtime& runtime;
  unsigned core;
  Backend backend = Backend::kIoUring;
  UringBackend uring{*this};
  EpollBackend epoll{*this};
  int event_fd = -1;

  std::int64_t now_us = 0;
  std::int64_t wall_us = 0;

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

  // Set by a peer that sent us a wake (MSG_RING or eventfd write), cleared by
  // us right before we sleep (ready_to_sleep): at most one wake in flight per
  // target.
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
  // Options::backend made concrete (probing io_uring for kAuto); "" or why
  // the chosen one cannot be used.
  std::string choose_backend();

  Options options;
  unsigned n;
  std::vector<int> cpus;  // CPU to pin core i to: cpus[i % cpus.size()]
  std::vector<std::unique_ptr<Reactor>> reactors;
  std::vector<std::unique_ptr<SpscRing<Task>>> mailboxes;  // [from * n + to]
  std::vector<std::thread> threads;
  Backend backend = Backend::kIoUring;
  std::string fallback_reason;
  // Every reactor and start() meet here once each backend is set up.
  std::unique_ptr<std::latch> backends_ready;
  std::mutex setup_mu;
  std::string setup_error;  // the first core's setup failure, under setup_mu
  std::atomic<bool> setup_failed{false};
};

}  // namespace ic::runtime
