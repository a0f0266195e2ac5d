// How a ServerSession ends: a graceful shutdown (GOAWAY, then the streams
// finish), the connection's age (GOAWAY only), the peer's EOF, and the
// connection's close.

#include <nghttp2/nghttp2.h>

#include "h2/server_session.hh"
#include "h2/session_stream.hh"

namespace ic::h2 {

void ServerSession::on_shutdown() {
  if (closed_ || shutting_down_) return;
  const Entry entry(*this);
  shutting_down_ = true;
  submit_goaway();
  app_->on_shutdown();
  conn_.request_flush();
}

void ServerSession::on_max_age() {
  if (closed_ || goaway_sent_) return;
  const Entry entry(*this);
  submit_goaway();  // the application is not told: its streams run on
  conn_.request_flush();
}

void ServerSession::submit_goaway() {
  if (goaway_sent_) return;
  goaway_sent_ = true;
  // Streams up to the last one we processed finish; newer ones are refused and
  // safe for the client to retry (RFC 9113 §6.8).
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void ServerSession::on_peer_eof() {
  if (closed_) return;
  const Entry entry(*this);
  bool any = false;
  for (const auto& [id, st] : streams_) {
    if (st->end_received || st->closed) continue;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    any = true;
  }
  if (any) app_->on_limit_hit(LimitHit::kHalfClosed);
  conn_.request_flush();
}

void ServerSession::on_close() {
  if (closed_) return;
  const Entry entry(*this);
  closed_ = true;
  for (auto& [id, st] : streams_) {
    if (st->delivered_request) app_->on_stream_close(id, NGHTTP2_CANCEL);
  }
  recent_.fill(nullptr);
  streams_.clear();
  dirty_.clear();
  held_in_.clear();
}

}  // namespace ic::h2
