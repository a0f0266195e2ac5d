// The session's side of the connection's hostile-peer watchdog
// (docs/hostile-peers.md): what it waits for from the peer, the deadlines,
// GOAWAY ENHANCE_YOUR_CALM, and the PING/SETTINGS and rapid-reset token
// buckets.

#include <nghttp2/nghttp2.h>

#include <algorithm>

#include "h2/server_session.hh"
#include "h2/session_stream.hh"

namespace ic::h2 {

void ServerSession::calm_down(LimitHit hit) {
  app_->on_limit_hit(hit);
  if (calm_) return;
  calm_ = true;
  nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

void ServerSession::refill_tokens(std::int64_t now_us) {
  // The watchdog's sample is also the buckets' clock.
  if (last_refill_us_ >= 0) {
    const double seconds = static_cast<double>(now_us - last_refill_us_) * 1e-6;
    control_tokens_.refill(seconds);
    reset_tokens_.refill(seconds);
  }
  last_refill_us_ = now_us;
}

net::PeerWaitState ServerSession::peer_wait(std::int64_t now_us) {
  refill_tokens(now_us);
  net::PeerWaitState w;
  if (progress_.mid_unit()) {
    if (unit_wait_since_ < 0 || unit_wait_mark_ != progress_.units()) {
      unit_wait_since_ = now_us;
      unit_wait_mark_ = progress_.units();
    }
    w = {net::PeerWait::kHeaderBlock, unit_wait_since_};
  } else {
    unit_wait_since_ = -1;
  }
  if (window_blocked()) {
    if (window_wait_since_ < 0) window_wait_since_ = now_us;
    if (w.kind == net::PeerWait::kNothing || window_wait_since_ < w.since_us) {
      w = {net::PeerWait::kFlowControl, window_wait_since_};
    }
  } else {
    window_wait_since_ = -1;
  }
  if (closed_) return w;
  const net::PeerWaitState app = app_->peer_wait(now_us);
  if (app.kind != net::PeerWait::kNothing &&
      (w.kind == net::PeerWait::kNothing || app.since_us < w.since_us)) {
    w = app;
  }
  return w;
}

void ServerSession::on_peer_deadline(net::PeerWait kind) {
  if (closed_) return;
  const Entry entry(*this);
  switch (kind) {
    case net::PeerWait::kNothing:
      return;
    case net::PeerWait::kHeaderBlock:
      calm_down(LimitHit::kHeaderTimeout);
      break;
    case net::PeerWait::kMessageBody:
      calm_down(LimitHit::kBodyTimeout);
      break;
    case net::PeerWait::kFlowControl:
      calm_down(LimitHit::kWindowStall);
      break;
  }
  conn_.request_flush();
}

bool ServerSession::window_blocked() const {
  const bool conn_blocked = nghttp2_session_get_remote_window_size(session_) <= 0;
  for (const auto& [id, st] : streams_) {
    if (!st->responded || st->closed || st->out_off >= st->out.size()) continue;
    if (conn_blocked || nghttp2_session_get_stream_remote_window_size(session_, id) <= 0) {
      return true;
    }
  }
  return false;
}

}  // namespace ic::h2
