#pragma once
// ServerSession's per-stream state, shared by its files (server_session.cc:
// the nghttp2 callbacks, dispatch and the unary answer, which also defines
// the functions below; session_output.cc, session_end.cc). Internal to src/h2.

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "h2/server_session.hh"

namespace ic::h2 {

// Per-stream state. Request side is filled by the nghttp2 callbacks and
// drained by dispatch(); response side is filled by respond/write/finish and
// drained by the data source read callback.
struct ServerSession::Stream {
  explicit Stream(StreamId stream_id) : id(stream_id) {}
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream& operator=(Stream&&) = default;
  // Turns a finished stream into a fresh one for `next`, keeping the capacity
  // of its buffers (the per-call allocations of a busy connection come from
  // these reused streams).
  void reuse_as(StreamId next);

  // Drops our references on the header buffers.
  void release_headers();

  StreamId id;
  // request: header fields stay in nghttp2's ref-counted buffers (no copy);
  // HPACK static-table names are static buffers.
  std::vector<std::pair<nghttp2_rcbuf*, nghttp2_rcbuf*>> headers;
  std::size_t header_bytes = 0;
  std::string in;  // body bytes received since the last dispatch
  bool headers_done = false;
  bool headers_too_large = false;
  bool end_received = false;
  bool closed = false;
  std::uint32_t close_code = 0;
  // delivery to the application
  bool dirty = false;
  bool delivered_request = false;
  bool delivered_end = false;
  bool rejected = false;  // answered by this layer (431); the app never sees it
  // response
  bool responded = false;
  bool body_done = false;
  bool deferred = false;
  bool trailers_submitted = false;  // finish_now() sent them; the body is over
  ResponseBytes out;
  std::size_t out_off = 0;
  std::vector<Header> trailers;
};

}  // namespace ic::h2
