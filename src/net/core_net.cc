#include "net/core_net.hh"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "base/log.hh"

namespace ic::net {

namespace {
// Re-arm delay after the multishot accept ended with an error (EMFILE, ...),
// so a persistent error does not spin the core.
constexpr std::int64_t kAcceptRetryUs = 50'000;
enum : std::uint8_t { kAcceptOp = 1 };
// "connection limit reached": one line per 10 s across cores and listeners.
base::LogRateLimit g_limit_log(10'000'000);
}  // namespace

// ---- Acceptor ----

Acceptor::Acceptor(CoreNet& core, ListenerState& listener, int fd)
    : core_(core), listener_(listener), fd_(fd) {}

Acceptor::~Acceptor() {
  if (retry_timer_ != 0) core_.reactor().cancel_timer(retry_timer_);
  if (registered_) core_.reactor().unregister_io(slot_);
  if (fd_ >= 0) ::close(fd_);
  listener_.fds[core_.core()] = -1;
}

void Acceptor::arm() {
  if (closing_ || fd_ < 0) return;
  if (!registered_) {
    slot_ = core_.reactor().register_io(*this);
    registered_ = true;
  }
  core_.reactor().accept(slot_, kAcceptOp, fd_);
  armed_ = true;
}

void Acceptor::release() {
  if (registered_) core_.reactor().unregister_io(slot_);
  registered_ = false;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  listener_.fds[core_.core()] = -1;
}

void Acceptor::close() {
  if (closing_) return;
  closing_ = true;
  if (retry_timer_ != 0) {
    core_.reactor().cancel_timer(retry_timer_);
    retry_timer_ = 0;
  }
  if (!armed_) {
    release();
    return;
  }
  core_.reactor().cancel(fd_);
}

void Acceptor::on_completion(std::uint8_t /*op*/, std::int32_t res, std::uint32_t flags) {
  if (res >= 0) accept_one(res);
  if (flags & runtime::kCompletionMore) return;
  armed_ = false;
  if (closing_) {
    release();
    return;
  }
  if (res >= 0) {
    arm();
  } else {
    retry_timer_ = core_.reactor().add_timer(kAcceptRetryUs, [this] {
      retry_timer_ = 0;
      arm();
    });
  }
}

void Acceptor::accept_one(int fd) {
  if (closing_) {
    ::close(fd);
    return;
  }
  const auto open = listener_.stats.open.fetch_add(1, std::memory_order_relaxed);
  if (open >= static_cast<std::int64_t>(listener_.options.max_connections)) {
    listener_.stats.open.fetch_sub(1, std::memory_order_relaxed);
    listener_.stats.rejected_total.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t suppressed = 0;
    if (g_limit_log.allow(base::log_clock_us(), &suppressed)) {
      base::log(base::LogLevel::warn, "connection limit reached: connection refused",
                {{"listener", listener_.options.name},
                 {"max_connections", listener_.options.max_connections},
                 {"suppressed", suppressed}});
    }
    ::close(fd);
    return;
  }
  listener_.stats.accepted_total.fetch_add(1, std::memory_order_relaxed);
  // gRPC replies are small and latency-bound: never wait for Nagle.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto* conn = new TcpConnection(core_, listener_, fd);
  if (base::log_enabled(base::LogLevel::debug)) {
    base::log(base::LogLevel::debug, "connection accepted",
              {{"listener", listener_.options.name},
               {"peer", conn->peer()},
               {"core", core_.core()},
               {"open", open + 1}});
  }
  core_.link(conn);
  conn->start(listener_.options.factory(*conn));
}

// ---- CoreNet ----

CoreNet::~CoreNet() {
  while (head_ != nullptr) {
    TcpConnection* c = head_;
    head_ = c->next;
    delete c;
  }
}

void CoreNet::start(runtime::Reactor& reactor, std::vector<ListenerState*> listeners) {
  reactor_ = &reactor;
  reactor.add_turn_hook([this] { turn_end(); });
  reactor.add_stop_hook([this] { abort_all(); });
  for (ListenerState* l : listeners) {
    acceptors_.push_back(std::make_unique<Acceptor>(*this, *l, l->fds[core_]));
    acceptors_.back()->arm();
  }
}

void CoreNet::link(TcpConnection* c) {
  c->next = head_;
  if (head_ != nullptr) head_->prev = c;
  head_ = c;
  ++count_;
  if (draining(c->listener())) c->begin_drain();
}

void CoreNet::turn_end() {
  // Connections marked during this pass (a flush that sends more) are already
  // flagged dirty, so they are not queued twice. One whose Session asked for
  // another flush meanwhile (input held over its per-turn budget, TLS
  // records to redeliver) is queued for the next turn, which the reactor then
  // runs without sleeping.
  work_.swap(dirty_);
  for (TcpConnection* c : work_) {
    c->turn_end();
    c->dirty = false;
    if (c->wants_next_turn()) {
      c->dirty = true;
      dirty_.push_back(c);
    }
  }
  for (TcpConnection* c : work_) {
    if (!c->finished()) continue;
    if (c->prev != nullptr) c->prev->next = c->next;
    if (c->next != nullptr) c->next->prev = c->prev;
    if (head_ == c) head_ = c->next;
    --count_;
    delete c;
  }
  work_.clear();
  if (!dirty_.empty()) reactor_->defer([] {});  // keep the loop awake for them
  if (shutting_down_) check_drained();
}

void CoreNet::begin_shutdown(std::int64_t grace_us, std::function<void()> drained,
                             std::function<bool(const ListenerState&)> which) {
  if (shutting_down_) return;
  shutting_down_ = true;
  drained_ = std::move(drained);
  which_ = std::move(which);
  for (auto& a : acceptors_)
    if (which_(a->listener())) a->close();
  for (TcpConnection* c = head_; c != nullptr; c = c->next)
    if (which_(c->listener())) c->begin_drain();
  grace_timer_ = reactor_->add_timer(grace_us, [this] {
    grace_timer_ = 0;
    for (TcpConnection* c = head_; c != nullptr; c = c->next)
      if (which_(c->listener())) c->close(true);
  });
  check_drained();
}

void CoreNet::check_drained() {
  if (!drained_ || count_ == checked_count_) return;
  // Walk the list only when a connection came or went since the last check.
  checked_count_ = count_;
  for (TcpConnection* c = head_; c != nullptr; c = c->next)
    if (which_(c->listener())) return;
  for (auto& a : acceptors_)
    if (which_(a->listener()) && !a->closed()) {
      checked_count_ = SIZE_MAX;  // re-check once the accept completion arrived
      return;
    }
  if (grace_timer_ != 0) {
    reactor_->cancel_timer(grace_timer_);
    grace_timer_ = 0;
  }
  auto done = std::move(drained_);
  drained_ = nullptr;
  done();
}

void CoreNet::abort_all() {
  for (auto& a : acceptors_) a->close();
  for (TcpConnection* c = head_; c != nullptr; c = c->next) c->close(true);
}

}  // namespace ic::net
