#include "net/tcp_connection.hh"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.hh"
#include "net/address.hh"
#include "net/age_jitter.hh"
#include "net/core_net.hh"

namespace ic::net {

namespace {
// A drained output buffer bigger than this is released rather than kept.
constexpr std::size_t kKeepBufferBytes = 256 * 1024;
}  // namespace

TcpConnection::TcpConnection(CoreNet& core, ListenerState& listener, int fd)
    : core_(core), listener_(listener), fd_(fd), slot_(core.reactor().register_io(*this)) {
  // Without the core's shared receive buffers, read into a buffer of our own.
  if (!core.reactor().shared_recv_buffers()) rbuf_.reset(new std::byte[kRecvBufferBytes]);
  last_active_us_ = core_.reactor().now_us();
  if (listener_.options.max_connection_age_us > 0) {
    age_goaway_us_ =
        last_active_us_ + jittered(listener_.options.max_connection_age_us, next_age_draw());
  }
}

TcpConnection::~TcpConnection() {
  // finish() normally did all of this; the fallback covers a Server torn down
  // with connections never started.
  if (!finished_) {
    if (idle_timer_ != 0) core_.reactor().cancel_timer(idle_timer_);
    if (session_) session_->on_close();
    session_.reset();
    ::close(fd_);
    core_.reactor().unregister_io(slot_);
    listener_.stats.open.fetch_sub(1, std::memory_order_relaxed);
  }
}

void TcpConnection::start(std::unique_ptr<Session> session) {
  session_ = std::move(session);
  if (!session_) {
    close(true);
    return;
  }
  if (tick_us() > 0) arm_idle_timer(tick_us());
  mark_dirty();  // first turn_end arms the recv
}

void TcpConnection::mark_dirty() {
  if (dirty || finished_) return;
  dirty = true;
  core_.mark_dirty(this);
}

void TcpConnection::send(std::span<const std::byte> bytes) {
  if (closing_ || finished_ || bytes.empty()) return;
  if (queued_bytes() == 0) stall_since_us_ = core_.reactor().now_us();
  out_pending_.insert(out_pending_.end(), bytes.begin(), bytes.end());
  queued_output();
}

void TcpConnection::send_buffer(std::vector<std::byte>& bytes) {
  if (!out_pending_.empty() || closing_ || finished_ || bytes.empty()) {
    send(bytes);
  } else {
    if (queued_bytes() == 0) stall_since_us_ = core_.reactor().now_us();
    out_pending_.swap(bytes);  // `bytes` gets the drained pending buffer
    queued_output();
  }
  bytes.clear();
}

void TcpConnection::queued_output() {
  if (queued_bytes() > listener_.hard_output_cap()) {
    // The protocol ignored queued_bytes(): cut the peer off instead of
    // growing without bound (rule 5).
    close(true);
    return;
  }
  mark_dirty();
}

std::size_t TcpConnection::queued_bytes() const {
  return (out_inflight_.size() - inflight_off_) + out_pending_.size();
}

void TcpConnection::pause_reading() { user_paused_ = true; }

void TcpConnection::resume_reading() {
  if (!user_paused_) return;
  user_paused_ = false;
  mark_dirty();
}

void TcpConnection::request_flush() {
  flush_wanted_ = true;
  mark_dirty();
}

void TcpConnection::close(bool abort) {
  closing_ = true;
  aborting_ = aborting_ || abort;
  mark_dirty();
}

unsigned TcpConnection::core() const { return core_.core(); }

std::string_view TcpConnection::peer() const {
  if (peer_.empty()) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    peer_ = getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0
                ? format_address(reinterpret_cast<sockaddr*>(&ss), len)
                : "?";
  }
  return peer_;
}

void TcpConnection::arm_recv() {
  // No buffer of our own: the core's shared ones (one is picked when data arrives).
  core_.reactor().recv(
      slot_, kRecv, fd_,
      rbuf_ ? std::span<std::byte>(rbuf_.get(), kRecvBufferBytes) : std::span<std::byte>());
  recv_armed_ = true;
  ++ops_;
}

void TcpConnection::try_send() {
  if (send_armed_) return;
  if (inflight_off_ == out_inflight_.size()) {
    out_inflight_.clear();
    inflight_off_ = 0;
    if (out_inflight_.capacity() > kKeepBufferBytes) out_inflight_.shrink_to_fit();
    if (out_pending_.empty()) return;
    out_inflight_.swap(out_pending_);
  }
  if (!send_inline()) return;
  core_.reactor().send(slot_, kSend, fd_,
                       std::span<const std::byte>(out_inflight_).subspan(inflight_off_));
  send_armed_ = true;
  ++ops_;
}

bool TcpConnection::send_inline() {
  // Nothing is in flight, so the bytes may go out right now, in this turn:
  // a response to a call that woke an idle reactor then costs no second
  // io_uring_enter for its send and no second loop turn for the completion
  // (docs/architecture.md rule 2). Only what the socket does not take now
  // (EAGAIN, a short write) goes through the reactor, which waits for room.
  const ssize_t n = ::send(fd_, out_inflight_.data() + inflight_off_,
                           out_inflight_.size() - inflight_off_, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    close(true);  // EPIPE, ECONNRESET: the peer is gone
    return false;
  }
  last_active_us_ = core_.reactor().now_us();
  if (n > 0) stall_since_us_ = last_active_us_;
  inflight_off_ += static_cast<std::size_t>(n);
  // The queue shrank. Only a protocol that paused its reading on it has
  // something held back (turn_end flushes it again in this turn); any other
  // has produced all it had, and asking for a flush would cost every call
  // one more loop turn and io_uring_enter before the reactor sleeps.
  if (user_paused_) flush_wanted_ = true;
  if (inflight_off_ < out_inflight_.size()) return true;
  out_inflight_.clear();
  inflight_off_ = 0;
  return false;
}

void TcpConnection::cancel_all() {
  if (cancel_sent_ || ops_ == 0) return;
  cancel_sent_ = true;
  core_.reactor().cancel(fd_);
}

void TcpConnection::on_completion(std::uint8_t op, std::int32_t res, std::uint32_t flags) {
  --ops_;
  if (op == kRecv) {
    if (flags & runtime::kCompletionBuffer) {
      on_recv(res, core_.reactor().received(flags, res));
      core_.reactor().release_received(flags);  // on_data's view ended with the call
    } else {
      on_recv(res,
              std::span<const std::byte>(rbuf_.get(), res > 0 ? static_cast<std::size_t>(res) : 0));
    }
  } else {
    on_send(res);
  }
  mark_dirty();
}

void TcpConnection::on_recv(std::int32_t res, std::span<const std::byte> data) {
  recv_armed_ = false;
  if (res > 0) {
    last_active_us_ = core_.reactor().now_us();
    if (closing_ || !session_) return;
    if (!session_->on_data(data)) close(false);
    flush_wanted_ = true;
  } else if (res == 0) {
    peer_eof_ = true;
    // Calls still waiting for the peer's bytes can never finish: let the
    // protocol drop them so the slot is released once the rest is answered.
    if (!closing_ && session_) session_->on_peer_eof();
    flush_wanted_ = true;
  } else if (res == -ENOBUFS) {
    // The core's buffer pool ran dry for this batch: the bytes wait in the
    // socket and the next turn re-arms the read.
  } else if (res != -ECANCELED) {
    close(true);  // ECONNRESET and friends: the peer is gone
  }
}

void TcpConnection::on_send(std::int32_t res) {
  send_armed_ = false;
  if (res < 0) {
    if (res != -ECANCELED) close(true);  // EPIPE, ECONNRESET
    return;
  }
  last_active_us_ = core_.reactor().now_us();
  if (res > 0) stall_since_us_ = last_active_us_;
  inflight_off_ += static_cast<std::size_t>(res);
  // The queue shrank: let the protocol produce what it held back.
  flush_wanted_ = true;
}

void TcpConnection::apply_backpressure() {
  const std::size_t queued = queued_bytes();
  if (queued > listener_.options.output_high_water) {
    bp_paused_ = true;
  } else if (queued <= listener_.options.output_high_water / 2) {
    bp_paused_ = false;
  }
}

void TcpConnection::turn_end() {
  if (finished_) return;
  if (!closing_ && session_ && flush_wanted_) {
    flush_wanted_ = false;
    session_->flush();
  }
  if (!aborting_) {
    try_send();
    if (flush_wanted_ && user_paused_ && !closing_ && session_) {
      // The inline send emptied the queue the protocol paused its reading
      // on: let it resume (and produce what it held back) in this turn.
      flush_wanted_ = false;
      session_->flush();
      try_send();
    }
  }
  if (aborting_) {  // also when the inline send found the peer gone
    cancel_all();
  } else {
    apply_backpressure();
    const bool written = queued_bytes() == 0 && !send_armed_;
    if (!closing_ && written && session_ && (peer_eof_ || draining_) && session_->idle()) {
      closing_ = true;
    }
    if (closing_) {
      if (written) cancel_all();  // the pending recv
    } else if (!recv_armed_ && !peer_eof_ && !user_paused_ && !bp_paused_) {
      arm_recv();
    }
  }
  if (closing_ && ops_ == 0) finish();
}

void TcpConnection::begin_drain() {
  if (shutting_down_ || finished_) return;
  shutting_down_ = true;
  draining_ = true;
  if (session_ && !closing_) session_->on_shutdown();
  flush_wanted_ = true;
  mark_dirty();
}

void TcpConnection::begin_age_drain() {
  if (draining_ || finished_) return;
  draining_ = true;
  if (session_ && !closing_) session_->on_max_age();
  flush_wanted_ = true;
  mark_dirty();
}

void TcpConnection::finish() {
  finished_ = true;
  if (base::log_enabled(base::LogLevel::debug)) {
    base::log(base::LogLevel::debug, "connection closed",
              {{"listener", listener_.options.name},
               {"peer", peer()},
               {"aborted", aborting_},
               {"peer_eof", peer_eof_}});
  }
  if (idle_timer_ != 0) {
    core_.reactor().cancel_timer(idle_timer_);
    idle_timer_ = 0;
  }
  if (session_) {
    session_->on_close();
    session_.reset();
  }
  ::close(fd_);
  core_.reactor().unregister_io(slot_);
  listener_.stats.open.fetch_sub(1, std::memory_order_relaxed);
}

std::int64_t TcpConnection::tick_us() const {
  // A quarter of the shortest deadline, between 10 ms and 1 s: a deadline is
  // enforced at most a quarter late.
  std::int64_t shortest = 0;
  const std::int64_t age = listener_.options.max_connection_age_us;
  for (const std::int64_t t :
       {listener_.options.idle_timeout_us, listener_.options.request_timeout_us, age,
        age > 0 ? listener_.options.max_connection_age_grace_us : 0}) {
    if (t > 0 && (shortest == 0 || t < shortest)) shortest = t;
  }
  if (shortest == 0) return 0;
  return std::clamp<std::int64_t>(shortest / 4, 10'000, 1'000'000);
}

void TcpConnection::arm_idle_timer(std::int64_t delay_us) {
  idle_timer_ = core_.reactor().add_timer(delay_us, [this] { on_idle_timer(); });
}

bool TcpConnection::peer_deadline_passed(std::int64_t now) {
  const PeerWaitState w = session_->peer_wait(now);
  std::int64_t limit = 0;
  switch (w.kind) {
    case PeerWait::kNothing:
      return false;
    case PeerWait::kHeaderBlock:
    case PeerWait::kMessageBody:
      limit = listener_.options.request_timeout_us;
      break;
    case PeerWait::kFlowControl:
      limit = listener_.options.idle_timeout_us;
      break;
  }
  if (limit <= 0 || now - w.since_us < limit) return false;
  session_->on_peer_deadline(w.kind);
  session_->flush();
  return true;
}

void TcpConnection::check_age(std::int64_t now) {
  if (age_goaway_us_ == 0 || now < age_goaway_us_) return;
  if (age_abort_us_ == 0) {
    age_abort_us_ = now + listener_.options.max_connection_age_grace_us;
    // GOAWAY now, the server stays up: calls and streams run on, turn_end
    // closes the connection once they are done, the grace cuts the rest.
    begin_age_drain();
  } else if (now >= age_abort_us_) {
    close(true);  // calls still in flight after the grace
  }
}

void TcpConnection::on_idle_timer() {
  idle_timer_ = 0;
  if (finished_) return;
  const std::int64_t now = core_.reactor().now_us();
  arm_idle_timer(tick_us());
  if (closing_) {
    // A graceful close whose last bytes the peer does not read: abort it once
    // its output made no progress for a whole tick.
    if (closing_since_us_ == 0) {
      closing_since_us_ = now;
    } else if (!aborting_ && now - std::max(closing_since_us_, stall_since_us_) >= tick_us()) {
      close(true);
    }
    return;
  }
  check_age(now);
  if (closing_) return;
  if (peer_deadline_passed(now)) {
    close(false);
    return;
  }
  const std::int64_t timeout = listener_.options.idle_timeout_us;
  if (timeout <= 0 || now - last_active_us_ < timeout) return;
  if (queued_bytes() > 0 && now - stall_since_us_ >= timeout) {
    // The peer stopped reading: our output made no progress for a whole
    // timeout. Cut it off rather than hold its queue forever (rule 9).
    close(true);
    return;
  }
  if (peer_eof_) {
    // Half-closed and silent for a whole timeout with calls still open: the
    // peer cannot send anything more, so nothing it waits for is coming.
    close(true);
    return;
  }
  if (!session_->idle() || queued_bytes() > 0) return;  // busy (a long call)
  // Idle too long: say goodbye (GOAWAY) and close once it is written.
  session_->on_shutdown();
  session_->flush();
  close(false);
}

}  // namespace ic::net
