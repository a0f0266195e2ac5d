#pragma once
// The io_uring backend of a Reactor (docs/architecture.md rules 1, 2, 4):
// operations are SQEs, their completions CQEs reaped in batches, the sleep is
// one io_uring_enter that also submits the turn's SQEs, and a peer core is
// woken with IORING_OP_MSG_RING. Private to src/runtime (reactor_impl.hh).

#include <liburing.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "runtime/buffer_ring.hh"
#include "runtime/runtime.hh"

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

// Creates (and closes) a ring of the size a reactor uses: 0 when this
// process may use io_uring, else -errno from io_uring_setup.
int probe_io_uring();
// Why io_uring_setup failed with `error` (-errno) and how to allow it, for
// the log: the errno text, kernel.io_uring_disabled when set, the likely cause.
std::string io_uring_refusal(int error);

class UringBackend {
 public:
  explicit UringBackend(Reactor::Impl& impl) : impl_(impl) {}
  UringBackend(const UringBackend&) = delete;
  UringBackend& operator=(const UringBackend&) = delete;

  // Creates the ring (on the reactor's own thread: SINGLE_ISSUER), its
  // receive buffers and the eventfd read; "" or why it failed.
  std::string init();
  void exit();
  bool ready() const { return ready_; }
  unsigned setup_flags() const { return setup_flags_; }
  int ring_fd() const { return ring_.ring_fd; }

  // Dispatches up to Reactor::kCqeBudget completions; true when more wait.
  bool reap();
  // Wakes `peer` (a MSG_RING from this ring to its ring, at submit).
  void wake(unsigned target, UringBackend& peer);
  // Submits the turn's SQEs, then sleeps until a completion or `deadline_us`
  // (CLOCK_MONOTONIC; none: no timer), unless `poll_only`.
  void wait(bool poll_only, std::optional<std::int64_t> deadline_us);
  // Submits and waits up to 10 ms for a completion (the stop drain).
  void drain_wait();

  // The operations (Reactor::accept ...), `key` their completion key.
  void accept(std::uint64_t key, int fd) {
    io_uring_prep_multishot_accept(prepare(key), fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
  void recv(std::uint64_t key, int fd, std::span<std::byte> own) {
    io_uring_sqe* sqe = prepare(key);
    if (own.empty()) {
      // The kernel picks a buffer from the pool when data arrives.
      io_uring_prep_recv(sqe, fd, nullptr, recv_buffers_->buffer_size(), 0);
      sqe->flags |= IOSQE_BUFFER_SELECT;
      sqe->buf_group = recv_buffers_->group();
    } else {
      io_uring_prep_recv(sqe, fd, own.data(), own.size(), 0);
    }
  }
  void send(std::uint64_t key, int fd, std::span<const std::byte> bytes) {
    io_uring_prep_send(prepare(key), fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  void cancel(int fd) {
    io_uring_prep_cancel_fd(prepare(kUntrackedUserData), fd, IORING_ASYNC_CANCEL_ALL);
  }
  bool shared_recv_buffers() const { return recv_buffers_ != nullptr; }
  std::span<const std::byte> received(std::uint32_t flags, std::int32_t res) const {
    return recv_buffers_->view(static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT),
                               res > 0 ? static_cast<std::size_t>(res) : 0);
  }
  void release_received(std::uint32_t flags) {
    recv_buffers_->recycle(static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT));
  }

 private:
  // An SQE with `user_data`; never null: a full submission queue is
  // submitted first. The prep_* helper run next clears sqe->flags, so
  // callers set flags after it.
  io_uring_sqe* prepare(std::uint64_t user_data) {
    io_uring_sqe* sqe = get_sqe();
    io_uring_sqe_set_data64(sqe, user_data);
    return sqe;
  }
  io_uring_sqe* get_sqe();
  void dispatch(std::uint64_t user_data, std::int32_t res, std::uint32_t flags);
  void arm_event_read();
  // Makes the armed sleep timeout fire by `deadline_us` (CLOCK_MONOTONIC):
  // arms one, or moves the armed one earlier; a later one is left as is.
  void arm_sleep_timeout(std::int64_t deadline_us);
  // The CQE of the sleep timeout or of its update.
  void on_timeout_cqe(std::uint64_t user_data, std::int32_t res);

  Reactor::Impl& impl_;
  io_uring ring_{};
  bool ready_ = false;
  unsigned setup_flags_ = 0;                  // IORING_SETUP_* the ring was created with
  std::unique_ptr<BufferRing> recv_buffers_;  // null when unsupported
  std::uint64_t event_buf_ = 0;

  // The one io_uring timeout that bounds a sleep while timers are pending
  // (DEFER_TASKRUN rings): armed once and moved only when an earlier timer
  // comes, so a wake-up does not also submit and reap a timeout.
  bool single_timeout_ = false;
  std::int64_t timeout_at_ = 0;  // its deadline, 0 when none is armed
  std::uint64_t timeout_seq_ = 0;
  // The timespec its SQE points at. The kernel copies it when the SQE is
  // submitted (in the io_uring_enter of the sleep), after the function that
  // prepared the SQE returned: it must outlive that frame.
  __kernel_timespec timeout_ts_{};
};

}  // namespace ic::runtime
