// The io_uring backend (backend_uring.hh).

#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "runtime/reactor_impl.hh"

namespace ic::runtime {

static_assert(kCompletionBuffer == IORING_CQE_F_BUFFER);
static_assert(kCompletionMore == IORING_CQE_F_MORE);

namespace {

constexpr unsigned kRingEntries = 2048;
// Completion queue entries (IORING_SETUP_CQSIZE; the default is twice the
// submission queue): multishot accepts and receives post several completions
// per submission, and a turn that reaps kCqeBudget at a time must not push
// the kernel into its overflow list.
constexpr unsigned kCqEntries = 4 * kRingEntries;
// Shared receive buffers per core: enough for a full CQE batch of reads of
// typical request sizes; a read that finds none fails with ENOBUFS and is
// simply re-armed (the bytes wait in the socket).
constexpr std::uint16_t kRecvBufferGroup = 0;
constexpr std::uint16_t kRecvBufferCount = 256;
constexpr std::uint32_t kRecvBufferBytes = 16 * 1024;

std::int64_t monotonic_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

// kernel.io_uring_disabled (6.6+): "0", "1" or "2"; "" when absent.
std::string io_uring_disabled_sysctl() {
  std::FILE* f = std::fopen("/proc/sys/kernel/io_uring_disabled", "re");
  if (f == nullptr) return {};
  char buf[8] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string value(buf, n);
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
  return value;
}

}  // namespace

int probe_io_uring() {
  // On a thread of its own: a thread that ever had a ring keeps io_uring
  // state whose teardown may later interrupt its blocking calls (EINTR in a
  // recv with SO_RCVTIMEO); the caller, often the main thread, never gets any.
  int rc = 0;
  std::thread([&rc] {
    io_uring ring{};
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = kCqEntries;
    rc = io_uring_queue_init_params(kRingEntries, &ring, &params);
    if (rc == -EINVAL) rc = io_uring_queue_init(kRingEntries, &ring, 0);  // before CQSIZE (5.5)
    if (rc == 0) io_uring_queue_exit(&ring);
  }).join();
  return rc;
}

std::string io_uring_refusal(int error) {
  std::string why = std::string("io_uring_setup: ") + std::strerror(-error);
  const std::string disabled = io_uring_disabled_sysctl();
  if (!disabled.empty() && disabled != "0") {
    return why + " (kernel.io_uring_disabled = " + disabled + ")";
  }
  switch (-error) {
    case EPERM:
    case EACCES:
      return why + " (a seccomp filter refuses it: container runtimes' default profiles do)";
    case ENOSYS:
      return why + " (the kernel or sandbox has no io_uring)";
    case ENOMEM:
      return why + " (locked-memory limit, RLIMIT_MEMLOCK, too low for the ring)";
    default:
      return why;
  }
}

std::string UringBackend::init() {
  // The setup liburing's own examples use, newest first, each step dropping
  // what an older kernel refuses with EINVAL (docs/architecture.md rule 1):
  // DEFER_TASKRUN (6.1) runs completion work only when this thread asks for
  // events, so a wake-up is one io_uring_enter that both submits and reaps;
  // SINGLE_ISSUER (6.0) lets the kernel skip submission locking; COOP_TASKRUN
  // (5.19) delivers completions on our own transitions instead of by IPI;
  // SUBMIT_ALL keeps submitting the batch past a failed SQE; CQSIZE gives the
  // completion queue room for a full turn of multishot accepts and receives.
  constexpr unsigned kSetups[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL |
          IORING_SETUP_CQSIZE,
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL |
          IORING_SETUP_CQSIZE,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CQSIZE,
      IORING_SETUP_CQSIZE,
      0,
  };
  int rc = -EINVAL;
  for (const unsigned flags : kSetups) {
    io_uring_params params{};
    params.flags = flags;
    params.cq_entries = kCqEntries;
    rc = io_uring_queue_init_params(kRingEntries, &ring_, &params);
    if (rc == 0) {
      setup_flags_ = flags;
      // Timeout updates (5.11) and CQE_SKIP_SUCCESS (5.17) predate
      // DEFER_TASKRUN (6.1).
      single_timeout_ = (flags & IORING_SETUP_DEFER_TASKRUN) != 0;
      break;
    }
    if (rc != -EINVAL) break;  // ENOMEM, EPERM...: no flag choice helps
  }
  if (rc < 0) return io_uring_refusal(rc);
  ready_ = true;
  // A registered ring fd saves the file lookup on every io_uring_enter
  // (5.18); best effort.
  io_uring_register_ring_fd(&ring_);
  recv_buffers_ =
      std::make_unique<BufferRing>(ring_, kRecvBufferGroup, kRecvBufferCount, kRecvBufferBytes);
  if (!recv_buffers_->ok()) recv_buffers_.reset();
  arm_event_read();
  return {};
}

void UringBackend::exit() {
  if (!ready_) return;
  recv_buffers_.reset();
  io_uring_queue_exit(&ring_);
  ready_ = false;
}

io_uring_sqe* UringBackend::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void UringBackend::arm_event_read() {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_read(sqe, impl_.event_fd, &event_buf_, sizeof event_buf_, 0);
  io_uring_sqe_set_data64(sqe, kEventUserData);
}

void UringBackend::dispatch(std::uint64_t user_data, std::int32_t res, std::uint32_t flags) {
  if (user_data == kUntrackedUserData || user_data == kWakeUserData) return;
  if (user_data == kEventUserData) {
    if (ready_) arm_event_read();
    return;
  }
  if (user_data == kTimeoutUpdateUserData ||
      (user_data >= kTimeoutBase && user_data <= kTimeoutBase + kTimeoutSeqMask)) {
    on_timeout_cqe(user_data, res);
    return;
  }
  if (user_data >= kWakeSentBase && user_data < kWakeSentBase + impl_.runtime.cores()) {
    // Our MSG_RING failed (its CQE only comes on failure): the target's flag
    // says a wake is in flight, so no later post would wake it; the eventfd does.
    impl_.runtime.reactor(static_cast<unsigned>(user_data - kWakeSentBase)).impl_->kick();
    return;
  }
  impl_.complete(user_data, res, flags);
}

bool UringBackend::reap() {
  // The whole batch in place, one cq_advance at the end (liburing's
  // io_uring_for_each_cqe). A handler that submits does not move the head,
  // so the entries stay valid until we advance.
  unsigned head = 0;
  unsigned n = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    dispatch(cqe->user_data, cqe->res, cqe->flags);
    if (++n == Reactor::kCqeBudget) break;
  }
  io_uring_cq_advance(&ring_, n);
  return n == Reactor::kCqeBudget;
}

void UringBackend::wake(unsigned target, UringBackend& peer) {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_msg_ring(sqe, peer.ring_.ring_fd, 0, kWakeUserData, 0);
  io_uring_sqe_set_data64(sqe, kWakeSentBase + target);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void UringBackend::wait(bool poll_only, std::optional<std::int64_t> deadline_us) {
  if (poll_only) {
    io_uring_submit_and_get_events(&ring_);
    return;
  }
  if (!deadline_us) {
    io_uring_submit_and_wait(&ring_, 1);
    return;
  }
  const std::int64_t delay = *deadline_us - monotonic_us();
  if (delay <= 0) {
    io_uring_submit_and_get_events(&ring_);
    return;
  }
  if (single_timeout_) {
    // One io_uring_enter per sleep, which also submits this turn's SQEs.
    // (liburing 2.3's submit_and_wait_timeout submits in one enter and waits
    // in a second: two per wake-up at moderate load.)
    arm_sleep_timeout(*deadline_us);
    io_uring_submit_and_wait(&ring_, 1);
    return;
  }
  __kernel_timespec ts{};
  ts.tv_sec = delay / 1'000'000;
  ts.tv_nsec = (delay % 1'000'000) * 1000;
  io_uring_cqe* cqe = nullptr;
  io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
}

void UringBackend::drain_wait() {
  io_uring_cqe* cqe = nullptr;
  __kernel_timespec ts{0, 10'000'000};
  io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
}

void UringBackend::arm_sleep_timeout(std::int64_t deadline_us) {
  // An armed timeout that fires no later than needed stays: waking at it
  // early costs one empty turn, re-arming on every sleep costs a timeout
  // SQE and CQE per wake-up. The kernel reads the timespec during the
  // submit, after this frame is gone: it is a member (timeout_ts_).
  if (timeout_at_ != 0 && timeout_at_ <= deadline_us) return;
  __kernel_timespec& ts = timeout_ts_;
  ts.tv_sec = deadline_us / 1'000'000;
  ts.tv_nsec = (deadline_us % 1'000'000) * 1000;
  io_uring_sqe* sqe = get_sqe();
  const std::uint64_t armed = kTimeoutBase + (timeout_seq_ & kTimeoutSeqMask);
  if (timeout_at_ != 0) {
    io_uring_prep_timeout_update(sqe, &ts, armed, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(sqe, kTimeoutUpdateUserData);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  } else {
    ++timeout_seq_;
    io_uring_prep_timeout(sqe, &ts, 0, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(sqe, kTimeoutBase + (timeout_seq_ & kTimeoutSeqMask));
  }
  timeout_at_ = deadline_us;
}

void UringBackend::on_timeout_cqe(std::uint64_t user_data, std::int32_t res) {
  if (user_data == kTimeoutUpdateUserData) {
    // -ENOENT: it fired meanwhile and its own CQE says so. Anything else:
    // it still runs at its old deadline; the next sleep arms a new one (the
    // old one's CQE is then stale and ignored).
    if (res != -ENOENT) timeout_at_ = 0;
    return;
  }
  if (user_data == kTimeoutBase + (timeout_seq_ & kTimeoutSeqMask)) timeout_at_ = 0;
}

std::string ring_setup_names(unsigned flags) {
  static constexpr std::pair<unsigned, const char*> kNames[] = {
      {IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER"},
      {IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN"},
      {IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"},
      {IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL"},
      {IORING_SETUP_CQSIZE, "CQSIZE"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if ((flags & bit) == 0) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out.empty() ? "none" : out;
}

}  // namespace ic::runtime
