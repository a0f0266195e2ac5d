#pragma once
// Thread-per-core runtime: one Reactor (event loop on io_uring, or on epoll
// where io_uring is refused) per core thread, and bounded cross-core
// mailboxes between them. Nothing here is shared mutable state on the hot
// path: cores talk only by posting owned Tasks (docs/architecture.md rules
// 1, 2, 5, 8).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cores.hh"
#include "runtime/task.hh"
#include "runtime/timers.hh"

namespace ic::runtime {

class Reactor;
class UringBackend;
class EpollBackend;

class Runtime;

// Index of the core whose reactor runs on the calling thread. Precondition:
// called on a reactor thread (checked: aborts on any other thread).
unsigned current_core();
// True on a reactor thread (of any Runtime).
bool on_reactor_thread();
// The reactor of the calling thread. Precondition: called on a reactor thread.
Reactor& current_reactor();
// Names of the IORING_SETUP_* flags in `flags` the reactor asks for, "|"
// separated ("SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL|CQSIZE"), "none" for 0.
std::string ring_setup_names(unsigned flags);

// The kernel interface a runtime's reactors wait and do their I/O with
// (docs/architecture.md "Reactor backends"). Every core of one runtime uses
// the same one.
enum class Backend : std::uint8_t { kIoUring, kEpoll };
// What Runtime::start sets up: kAuto is io_uring, or epoll when this process
// may not create an io_uring instance (seccomp, kernel.io_uring_disabled, a
// kernel or sandbox without it).
enum class BackendChoice : std::uint8_t { kAuto, kIoUring, kEpoll };
// "io_uring" or "epoll" (the serving log line and the build_info label).
std::string_view backend_name(Backend backend);
// Parses "auto", "io_uring" or "epoll"; std::nullopt for anything else.
std::optional<BackendChoice> parse_backend_choice(std::string_view text);

// Flags of an I/O completion (Reactor::IoHandler::on_completion), the same
// bits on both backends (the io_uring CQE's).
// The bytes of a recv without a buffer of its own: Reactor::received().
inline constexpr std::uint32_t kCompletionBuffer = 1u << 0;
// More completions follow for the same operation (accept).
inline constexpr std::uint32_t kCompletionMore = 1u << 1;

// The cores of this process (runtime::Cores: the cross-core verb of
// runtime/submit.hh runs on it).
class Runtime final : public Cores {
 public:
  struct Options {
    unsigned cores = 0;                  // 0 = all online CPUs
    std::uint32_t mailbox_depth = 4096;  // tasks in flight per (from, to) pair
    bool pin_threads = true;             // sched_setaffinity each reactor to its CPU
    BackendChoice backend = BackendChoice::kAuto;
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

  // Picks the backend (Options::backend), sets it up on every reactor thread,
  // then runs `on_start(core)` first on each of them. Returns "" when they
  // run; else why not (e.g. "io_uring_setup: Operation not permitted (...)"
  // for an explicit kIoUring under a seccomp filter, or a core's setup
  // failure), with no thread left running and on_start never called.
  std::string start(std::function<void(unsigned core)> on_start);
  // The backend start() chose (kIoUring before it ran).
  Backend backend() const;
  // Why kAuto fell back to epoll (the io_uring_setup error and its likely
  // cause), "" when it did not.
  const std::string& fallback_reason() const;
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
// most `kMailboxBudget` per source); reap I/O completions (at most
// `kCqeBudget`); fire due timers (at most `kTimerBudget`); run deferred tasks;
// run turn hooks (src/net flushes sessions and starts sends there); wake the
// cores we posted to (IORING_OP_MSG_RING; an eventfd write on epoll); submit
// and sleep until a completion or the next timer deadline. Budgets bound the
// work of one turn (rule 2). The loop is compiled once per backend and chosen
// at start (runtime/backend_uring.hh, runtime/backend_epoll.hh).
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
  // for the earliest (on epoll: epoll_pwait2 with its delay). Timers with
  // equal deadlines fire in the order added.
  TimerId add_timer(std::int64_t delay_us, Task task) override;
  // Cancels a pending timer; no-op if it already fired.
  void cancel_timer(TimerId id) override;
  // Runs `task` at the end of the current loop turn (after I/O completions).
  // Tasks deferred by a deferred task run in the next turn (no sleep between).
  void defer(Task task);

  // ---- I/O entry points (used by src/net) ----

  // Receives the completions of the operations started for its slot. Rule 4:
  // the handler and every buffer its operations point at must stay alive
  // until the last of those completions arrived; only then may it unregister
  // and be freed.
  class IoHandler {
   public:
    // `op` is the tag given to accept()/recv()/send(); `res` is the result
    // (res < 0 is -errno), `flags` kCompletionMore / kCompletionBuffer.
    virtual void on_completion(std::uint8_t op, std::int32_t res, std::uint32_t flags) = 0;

   protected:
    ~IoHandler() = default;
  };
  // Completion key = tag (8 bits) | generation (24 bits) | slot (32 bits),
  // never a bare fd; a completion whose generation no longer matches is dropped.
  using IoSlot = std::uint64_t;

  // Registers a handler; returns its slot for the operations below.
  IoSlot register_io(IoHandler& handler);
  // Forgets the slot (late completions for it are dropped).
  void unregister_io(IoSlot slot);

  // The operations. None completes inline: each completion reaches `slot`'s
  // handler (tag `op`) in a later loop turn.
  //
  // Accepts on listening socket `fd` until cancelled or failed: one
  // completion per accepted socket (res = its fd, close-on-exec; also
  // non-blocking on epoll) with kCompletionMore; the last one lacks it
  // (res = -errno, -ECANCELED after cancel()).
  void accept(IoSlot slot, std::uint8_t op, int fd);
  // One receive on `fd`: res = bytes read, 0 at the peer's EOF, -errno
  // (-ENOBUFS: the shared buffers ran dry, re-arm later). Into `own` when it
  // is not empty, else into the core's shared receive buffers (flags then
  // carry kCompletionBuffer; see received()).
  void recv(IoSlot slot, std::uint8_t op, int fd, std::span<std::byte> own);
  // One send of `bytes` (alive until the completion): res = bytes written,
  // possibly fewer (send the rest again), or -errno.
  void send(IoSlot slot, std::uint8_t op, int fd, std::span<const std::byte> bytes);
  // Cancels every operation in flight on `fd`: each completes with
  // -ECANCELED unless it already completed. A no-op when none is.
  void cancel(int fd);
  // True when recv() may be given no buffer of its own (io_uring provided
  // buffer rings, 256 × 16 KiB per core; on epoll one 16 KiB buffer per core
  // read into right before the completion runs).
  bool shared_recv_buffers() const;
  // The first `res` bytes a recv() without its own buffer got (completion
  // flags with kCompletionBuffer); valid until release_received(flags).
  std::span<const std::byte> received(std::uint32_t flags, std::int32_t res) const;
  // Hands that buffer back once its bytes were consumed.
  void release_received(std::uint32_t flags);

  // Runs `hook` at the end of every turn, after deferred tasks.
  void add_turn_hook(std::function<void()> hook);
  // Runs `hook` on this thread once the loop stopped, before in-flight I/O is
  // drained and the backend torn down (src/net aborts its sockets there).
  void add_stop_hook(std::function<void()> hook);
  // Handlers still registered (for tests and the stop drain).
  std::size_t io_registered() const;
  // The IORING_SETUP_* flags the ring was created with: the newest set the
  // kernel accepted (backend_uring.cc); 0 before the reactor started and on epoll.
  unsigned ring_setup_flags() const;
  // The backend this reactor runs on.
  Backend backend() const;

 private:
  friend class Runtime;
  friend class UringBackend;
  friend class EpollBackend;
  struct Impl;
  Reactor(Runtime& runtime, unsigned core);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ic::runtime
