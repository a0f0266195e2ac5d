#pragma once
// The epoll backend of a Reactor, for where io_uring is refused or missing
// (docs/architecture.md "Reactor backends"). The same operations and
// completions as the io_uring backend (backend_uring.hh) above it: an
// operation records what is wanted of its fd; the loop runs the syscall once
// epoll (edge-triggered, one registration per fd) says the fd is ready, and
// hands the result to the slot's handler as a completion. A peer core is woken
// by a write to this reactor's eventfd. Private to src/runtime.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/runtime.hh"

struct epoll_event;

namespace ic::runtime {

class EpollBackend {
 public:
  // Bytes of the core's one shared receive buffer.
  static constexpr std::size_t kSharedRecvBytes = 16 * 1024;
  // Connections one ready listening socket accepts per turn.
  static constexpr unsigned kAcceptBudget = 64;
  // Readiness events collected per wait (more stay queued in the kernel).
  static constexpr int kMaxEvents = 512;

  explicit EpollBackend(Reactor::Impl& impl);
  ~EpollBackend();
  EpollBackend(const EpollBackend&) = delete;
  EpollBackend& operator=(const EpollBackend&) = delete;

  // Creates the epoll instance and watches the reactor's eventfd; "" or why
  // it failed.
  std::string init();
  void exit();

  // Delivers cancellations, then runs the operations of ready fds, up to
  // Reactor::kCqeBudget completions; true when more wait.
  bool reap();
  // Wakes `peer` (its eventfd).
  void wake(unsigned target, EpollBackend& peer);
  // Collects readiness: waits until an fd is ready, the eventfd is written
  // or `deadline_us` (CLOCK_MONOTONIC; none: no timer), unless `poll_only`.
  void wait(bool poll_only, std::optional<std::int64_t> deadline_us);
  // Waits up to 10 ms for readiness (the stop drain).
  void drain_wait();

  // The operations (Reactor::accept ...), `key` their completion key.
  void accept(std::uint64_t key, int fd);
  void recv(std::uint64_t key, int fd, std::span<std::byte> own);
  void send(std::uint64_t key, int fd, std::span<const std::byte> bytes);
  void cancel(int fd);
  bool shared_recv_buffers() const { return true; }
  std::span<const std::byte> received(std::uint32_t /*flags*/, std::int32_t res) const {
    return {shared_recv_.get(), res > 0 ? static_cast<std::size_t>(res) : 0};
  }
  void release_received(std::uint32_t /*flags*/) {}

 private:
  // What is wanted of one fd, and what epoll last said of it.
  struct FdState {
    std::uint64_t accept_key = 0;  // 0: no such operation pending
    std::uint64_t recv_key = 0;
    std::uint64_t send_key = 0;
    std::byte* recv_buf = nullptr;  // null: the shared buffer
    std::size_t recv_len = 0;
    const std::byte* send_buf = nullptr;
    std::size_t send_len = 0;
    bool watched = false;      // registered with epoll
    bool nonblocking = false;  // O_NONBLOCK known to be set (our accept4)
    bool readable = true;      // no EAGAIN on a read since the last EPOLLIN
    bool writable = true;      // no EAGAIN on a write since the last EPOLLOUT
    // Sticky once epoll reported them: the peer's FIN (or an error) is read
    // after the bytes before it, by a later recv, and raises no new edge.
    bool read_closed = false;   // EPOLLRDHUP, EPOLLHUP or EPOLLERR
    bool write_closed = false;  // EPOLLHUP or EPOLLERR
    bool runnable = false;      // queued in runnable_
  };
  struct Completion {
    std::uint64_t key;
    std::int32_t res;
    std::uint32_t flags;
  };

  // The state of `fd`, the table grown to hold it.
  FdState& state(int fd);
  // Registers `fd` (non-blocking, edge-triggered) on its first operation;
  // 0 or -errno.
  int watch(int fd);
  // Records operation `key` in `slot` of `fd`'s state, or completes it at
  // once with the error when `fd` cannot be watched.
  bool start(std::uint64_t key, int fd);
  // Queues `fd` for reap() when one of its operations can run now.
  void maybe_runnable(int fd);
  // Runs `fd`'s ready operations; returns the completions delivered.
  unsigned run_fd(int fd, unsigned budget);
  unsigned run_accept(int fd, unsigned budget);
  unsigned run_recv(int fd);
  unsigned run_send(int fd);
  // epoll_pwait2 (epoll_wait on kernels before 5.11) for up to `delay_us`
  // (< 0: no limit), then marks the reported fds ready.
  void collect(std::int64_t delay_us);

  Reactor::Impl& impl_;
  int epoll_fd_ = -1;
  bool pwait2_ = true;        // epoll_pwait2 available (5.11): sleeps to the µs
  std::vector<FdState> fds_;  // by fd number
  std::vector<int> runnable_;
  std::vector<int> running_;
  std::vector<Completion> cancelled_;  // delivered at the next reap()
  std::vector<Completion> delivering_;
  std::unique_ptr<std::byte[]> shared_recv_;
  std::unique_ptr<epoll_event[]> events_;
};

}  // namespace ic::runtime
