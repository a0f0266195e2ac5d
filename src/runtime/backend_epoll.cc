// The epoll backend (backend_epoll.hh).

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "runtime/reactor_impl.hh"

namespace ic::runtime {

namespace {

// epoll_event.data of the reactor's eventfd (fds use their number).
constexpr std::uint64_t kEventFdTag = ~std::uint64_t{0};

std::int64_t monotonic_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

std::string errno_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

}  // namespace

EpollBackend::EpollBackend(Reactor::Impl& impl) : impl_(impl) {}

EpollBackend::~EpollBackend() { exit(); }

std::string EpollBackend::init() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return errno_text("epoll_create1");
  // Edge-triggered and never read: every write to an eventfd raises a new
  // edge, so a wake costs the writer one write(2) and this loop no read(2).
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = kEventFdTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, impl_.event_fd, &ev) != 0) {
    std::string error = errno_text("epoll_ctl");
    exit();
    return error;
  }
  shared_recv_ = std::make_unique<std::byte[]>(kSharedRecvBytes);
  events_ = std::make_unique<epoll_event[]>(kMaxEvents);
  return {};
}

void EpollBackend::exit() {
  if (epoll_fd_ < 0) return;
  ::close(epoll_fd_);
  epoll_fd_ = -1;
  fds_.clear();
  runnable_.clear();
  cancelled_.clear();
}

EpollBackend::FdState& EpollBackend::state(int fd) {
  const auto i = static_cast<std::size_t>(fd);
  if (i >= fds_.size()) fds_.resize(std::max(i + 1, fds_.size() * 2));
  return fds_[i];
}

int EpollBackend::watch(int fd) {
  FdState& s = state(fd);
  if (s.watched) return 0;
  if (!s.nonblocking) {
    // The listening sockets come blocking; a spurious readiness must never
    // block the loop in accept4/recv/send.
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return -errno;
    s.nonblocking = true;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = static_cast<std::uint64_t>(fd);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    if (errno != EEXIST || epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) return -errno;
  }
  s.watched = true;
  return 0;
}

bool EpollBackend::start(std::uint64_t key, int fd) {
  if (const int err = watch(fd); err != 0) {
    cancelled_.push_back({key, err, 0});
    return false;
  }
  return true;
}

void EpollBackend::accept(std::uint64_t key, int fd) {
  if (!start(key, fd)) return;
  fds_[static_cast<std::size_t>(fd)].accept_key = key;
  maybe_runnable(fd);
}

void EpollBackend::recv(std::uint64_t key, int fd, std::span<std::byte> own) {
  if (!start(key, fd)) return;
  FdState& s = fds_[static_cast<std::size_t>(fd)];
  s.recv_key = key;
  s.recv_buf = own.empty() ? nullptr : own.data();
  s.recv_len = own.size();
  maybe_runnable(fd);
}

void EpollBackend::send(std::uint64_t key, int fd, std::span<const std::byte> bytes) {
  if (!start(key, fd)) return;
  FdState& s = fds_[static_cast<std::size_t>(fd)];
  s.send_key = key;
  s.send_buf = bytes.data();
  s.send_len = bytes.size();
  maybe_runnable(fd);
}

void EpollBackend::cancel(int fd) {
  if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) return;
  FdState& s = fds_[static_cast<std::size_t>(fd)];
  for (std::uint64_t* key : {&s.accept_key, &s.recv_key, &s.send_key}) {
    if (*key != 0) cancelled_.push_back({*key, -ECANCELED, 0});
    *key = 0;
  }
  // Its owner closes it next; the number may then come back as another fd.
  if (s.watched) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  const bool queued = s.runnable;
  s = FdState{};
  s.runnable = queued;
}

void EpollBackend::maybe_runnable(int fd) {
  FdState& s = fds_[static_cast<std::size_t>(fd)];
  if (s.runnable) return;
  const bool can_read = s.readable && (s.accept_key != 0 || s.recv_key != 0);
  const bool can_write = s.writable && s.send_key != 0;
  if (!can_read && !can_write) return;
  s.runnable = true;
  runnable_.push_back(fd);
}

bool EpollBackend::reap() {
  unsigned delivered = 0;
  if (!cancelled_.empty()) {
    delivering_.swap(cancelled_);
    for (const Completion& c : delivering_) impl_.complete(c.key, c.res, c.flags);
    delivered = static_cast<unsigned>(delivering_.size());
    delivering_.clear();
  }
  // Operations started by the handlers below queue into runnable_ for the
  // next turn; the loop does not sleep while it holds any.
  running_.swap(runnable_);
  std::size_t i = 0;
  for (; i < running_.size() && delivered < Reactor::kCqeBudget; ++i) {
    const int fd = running_[i];
    fds_[static_cast<std::size_t>(fd)].runnable = false;
    delivered += run_fd(fd, Reactor::kCqeBudget - delivered);
    maybe_runnable(fd);  // still ready with an operation pending (budget)
  }
  for (; i < running_.size(); ++i) runnable_.push_back(running_[i]);
  running_.clear();
  return !runnable_.empty() || !cancelled_.empty();
}

unsigned EpollBackend::run_fd(int fd, unsigned budget) {
  unsigned n = 0;
  const auto i = static_cast<std::size_t>(fd);
  // Handlers may grow fds_ (an accepted fd): look the state up after each.
  if (fds_[i].readable && fds_[i].accept_key != 0) n += run_accept(fd, budget);
  if (fds_[i].readable && fds_[i].recv_key != 0) n += run_recv(fd);
  if (fds_[i].writable && fds_[i].send_key != 0) n += run_send(fd);
  return n;
}

unsigned EpollBackend::run_accept(int fd, unsigned budget) {
  const auto i = static_cast<std::size_t>(fd);
  unsigned n = 0;
  while (n < budget && n < kAcceptBudget && fds_[i].accept_key != 0) {
    const int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) {
        fds_[i].readable = false;
        break;
      }
      if (err == EINTR || err == ECONNABORTED) continue;
      // EMFILE, ENFILE, ...: the accept ends, as a multishot accept does.
      const std::uint64_t key = fds_[i].accept_key;
      fds_[i].accept_key = 0;
      impl_.complete(key, -err, 0);
      return n + 1;
    }
    // A number an earlier, closed socket had: nothing of it applies.
    FdState& fresh = state(c);
    fresh = FdState{};
    fresh.nonblocking = true;
    impl_.complete(fds_[i].accept_key, c, kCompletionMore);
    ++n;
  }
  return n;
}

unsigned EpollBackend::run_recv(int fd) {
  FdState& s = fds_[static_cast<std::size_t>(fd)];
  std::byte* buf = s.recv_buf != nullptr ? s.recv_buf : shared_recv_.get();
  const std::size_t len = s.recv_buf != nullptr ? s.recv_len : kSharedRecvBytes;
  ssize_t got;
  do {
    got = ::recv(fd, buf, len, MSG_DONTWAIT);
  } while (got < 0 && errno == EINTR);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    s.readable = false;
    return 0;
  }
  const std::int32_t res = got < 0 ? -errno : static_cast<std::int32_t>(got);
  // Fewer bytes than room: the socket is drained, and new bytes raise
  // EPOLLIN; a FIN or error already reported does not, and stays readable.
  if (got > 0 && static_cast<std::size_t>(got) < len && !s.read_closed) s.readable = false;
  const std::uint64_t key = s.recv_key;
  const std::uint32_t flags = s.recv_buf != nullptr ? 0 : kCompletionBuffer;
  s.recv_key = 0;
  impl_.complete(key, res, flags);
  return 1;
}

unsigned EpollBackend::run_send(int fd) {
  FdState& s = fds_[static_cast<std::size_t>(fd)];
  ssize_t put;
  do {
    put = ::send(fd, s.send_buf, s.send_len, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (put < 0 && errno == EINTR);
  if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    s.writable = false;
    return 0;
  }
  const std::int32_t res = put < 0 ? -errno : static_cast<std::int32_t>(put);
  if (put >= 0 && static_cast<std::size_t>(put) < s.send_len && !s.write_closed) {
    s.writable = false;
  }
  const std::uint64_t key = s.send_key;
  s.send_key = 0;
  impl_.complete(key, res, 0);
  return 1;
}

void EpollBackend::wake(unsigned /*target*/, EpollBackend& peer) { peer.impl_.kick(); }

void EpollBackend::wait(bool poll_only, std::optional<std::int64_t> deadline_us) {
  // Operations that can run already (started this turn on a ready fd, or
  // over the budget) must not wait for a new edge.
  if (poll_only || !runnable_.empty() || !cancelled_.empty()) {
    collect(0);
  } else if (!deadline_us) {
    collect(-1);
  } else {
    collect(std::max<std::int64_t>(0, *deadline_us - monotonic_us()));
  }
}

void EpollBackend::drain_wait() { collect(10'000); }

void EpollBackend::collect(std::int64_t delay_us) {
  int n = 0;  // always set below; gcc -O2 with ASan cannot prove it (-Wmaybe-uninitialized)
  if (pwait2_) {
    timespec ts{delay_us / 1'000'000, (delay_us % 1'000'000) * 1000};
    n = epoll_pwait2(epoll_fd_, events_.get(), kMaxEvents, delay_us < 0 ? nullptr : &ts, nullptr);
    if (n < 0 && errno == ENOSYS) pwait2_ = false;  // before 5.11, or a filter refuses it
  }
  if (!pwait2_) {
    // Milliseconds, rounded up: never wake before the timer is due.
    const int ms = delay_us < 0 ? -1 : static_cast<int>((delay_us + 999) / 1000);
    n = epoll_wait(epoll_fd_, events_.get(), kMaxEvents, ms);
  }
  for (int e = 0; e < n; ++e) {
    const epoll_event& ev = events_[e];
    if (ev.data.u64 == kEventFdTag) continue;  // a wake: the turn looks at everything
    const int fd = static_cast<int>(ev.data.u64);
    FdState& s = state(fd);
    if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s.readable = true;
    if (ev.events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) s.writable = true;
    if (ev.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s.read_closed = true;
    if (ev.events & (EPOLLHUP | EPOLLERR)) s.write_closed = true;
    maybe_runnable(fd);
  }
}

}  // namespace ic::runtime
