// The server-streaming side of ServerSession: body bytes written piece by
// piece (StreamCacheEvents, StreamMetrics), the bytes a stream has not sent yet
// (the application's backpressure), and a stream reset. A unary answer takes
// write_buffer() and finish() in server_session.cc instead.

#include <nghttp2/nghttp2.h>

#include "h2/server_session.hh"
#include "h2/session_stream.hh"

namespace ic::h2 {

bool ServerSession::write(StreamId id, std::span<const std::byte> bytes) {
  Stream* st = find(id);
  if (st == nullptr || !st->responded || st->body_done || st->closed) return false;
  st->out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(session_, id);
  }
  wake();
  return true;
}

std::size_t ServerSession::unsent_bytes(StreamId id) {
  const Stream* st = find(id);
  return st == nullptr ? 0 : st->out.size() - st->out_off;
}

void ServerSession::reset(StreamId id, std::uint32_t error_code) {
  Stream* st = find(id);
  if (st == nullptr || st->closed || closed_) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, error_code);
  wake();
}

}  // namespace ic::h2
