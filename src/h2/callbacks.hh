#pragma once
// The one place that turns a set of nghttp2 callbacks into the library's
// nghttp2_session_callbacks (nghttp2 1.52 API: nghttp2_session_callbacks_new
// and its _set_*_callback setters). The server session, the tests' client
// session and the tools' client connection each name the callbacks they use
// with designated initializers; an unset (null) one stays nghttp2's default.
// Header-only: tools and tests use it without linking the server's h2 library.

#include <nghttp2/nghttp2.h>

#include <memory>
#include <new>

namespace ic::h2 {

// The callbacks a session installs; null = not installed.
struct Callbacks {
  nghttp2_on_begin_frame_callback on_begin_frame = nullptr;
  nghttp2_on_begin_headers_callback on_begin_headers = nullptr;
  nghttp2_on_header_callback on_header = nullptr;
  nghttp2_on_header_callback2 on_header2 = nullptr;  // refcounted name/value (rcbuf)
  nghttp2_on_frame_recv_callback on_frame_recv = nullptr;
  nghttp2_on_data_chunk_recv_callback on_data_chunk_recv = nullptr;
  nghttp2_on_stream_close_callback on_stream_close = nullptr;
  nghttp2_on_frame_send_callback on_frame_send = nullptr;
  nghttp2_send_data_callback send_data = nullptr;  // NGHTTP2_DATA_FLAG_NO_COPY bodies
  nghttp2_data_source_read_length_callback data_source_read_length = nullptr;
};

struct CallbacksDeleter {
  void operator()(nghttp2_session_callbacks* callbacks) const {
    nghttp2_session_callbacks_del(callbacks);
  }
};
using CallbacksPtr = std::unique_ptr<nghttp2_session_callbacks, CallbacksDeleter>;

// An nghttp2_session_callbacks holding `set` (the setters only store the
// pointer, so a null member leaves that callback unset, as
// nghttp2_session_callbacks_new made it), for nghttp2_session_{server,client}_new,
// which copy it: it may be freed, or kept and shared, afterwards. Throws
// std::bad_alloc when nghttp2 cannot allocate it.
inline CallbacksPtr make_callbacks(const Callbacks& set) {
  nghttp2_session_callbacks* raw = nullptr;
  if (nghttp2_session_callbacks_new(&raw) != 0) throw std::bad_alloc();
  CallbacksPtr callbacks(raw);
  nghttp2_session_callbacks_set_on_begin_frame_callback(raw, set.on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(raw, set.on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(raw, set.on_header);
  nghttp2_session_callbacks_set_on_header_callback2(raw, set.on_header2);
  nghttp2_session_callbacks_set_on_frame_recv_callback(raw, set.on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(raw, set.on_data_chunk_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(raw, set.on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(raw, set.on_frame_send);
  nghttp2_session_callbacks_set_send_data_callback(raw, set.send_data);
  nghttp2_session_callbacks_set_data_source_read_length_callback(raw, set.data_source_read_length);
  return callbacks;
}

}  // namespace ic::h2
