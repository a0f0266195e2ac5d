#pragma once
// The tests' one HTTP/2 client: a real nghttp2 client session, sans-IO (bytes
// out with take_output(), bytes in with receive()). The unit tests' in-memory
// harness (h2_harness.hh) pumps it against a server net::Session; the
// integration tests' H2Client (tests/integration/support/h2_client.hh) pumps
// it over a loopback socket. It can put on the wire what a well-behaved gRPC
// library never would (compressed flags, odd DATA framing, resets), and it
// records exactly what the server answered on each stream.
//
// Sources: RFC 9113 (HTTP/2), nghttp2 1.52 client API (nghttp2_session_client_new,
// nghttp2_submit_request, nghttp2_session_mem_recv/mem_send), gRPC over HTTP/2
// (PROTOCOL-HTTP2.md in grpc/grpc).

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "h2/callbacks.hh"

namespace ic::test {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// What the client saw and still has to send on one stream. The two clients
// add their own accessors (ClientStream in h2_harness.hh, itest::H2Response).
struct StreamState {
  HeaderList headers;   // the first HEADERS block (":status", "content-type", ...)
  HeaderList trailers;  // a later HEADERS block (gRPC trailers); empty for trailers-only
  std::string body;     // concatenated DATA payload bytes
  int header_blocks = 0;
  bool remote_ended = false;      // the server sent END_STREAM (its answer is complete)
  bool closed = false;            // closed both ways (or the connection is gone)
  bool rst_received = false;      // the server sent RST_STREAM
  bool reset = false;             // RST_STREAM sent or received
  bool connection_lost = false;   // the connection ended before the stream closed
  uint32_t close_error_code = 0;  // HTTP/2 error code (RFC 9113 §7): 0 NO_ERROR, 8 CANCEL, ...

  // Request body bytes not yet handed to nghttp2, and how to send them.
  std::string pending;
  std::size_t pending_offset = 0;
  std::size_t max_frame = 0;  // largest DATA payload per frame; 0 = as large as allowed
  bool eof = false;           // END_STREAM after `pending`
  bool deferred = false;      // the read callback returned NGHTTP2_ERR_DEFERRED
};

// How the client opens the connection.
struct ClientSettings {
  // Our SETTINGS (RFC 9113 §6.5.2); none = nghttp2's defaults.
  std::vector<nghttp2_settings_entry> settings;
  int32_t connection_window = 0;  // bytes of connection receive window; 0 = the default 64 KiB
  // DATA frames as large as the peer's SETTINGS_MAX_FRAME_SIZE (nghttp2
  // otherwise stops at 16 KiB).
  bool large_frames = false;
};

// Stream: StreamState or a type derived from it.
template <class Stream>
class BasicH2Client {
 public:
  explicit BasicH2Client(const ClientSettings& options = {}) {
    const ic::h2::CallbacksPtr callbacks = ic::h2::make_callbacks({
        .on_header = &on_header,
        .on_frame_recv = &on_frame_recv,
        .on_data_chunk_recv = &on_data_chunk,
        .on_stream_close = &on_stream_close,
        .data_source_read_length = options.large_frames ? &on_read_length : nullptr,
    });
    const int rv = nghttp2_session_client_new(&session_, callbacks.get(), this);
    if (rv != 0) throw std::runtime_error("nghttp2_session_client_new failed");
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, options.settings.data(),
                            options.settings.size());
    if (options.connection_window > 0) {
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                            options.connection_window);
    }
  }
  ~BasicH2Client() { nghttp2_session_del(session_); }
  BasicH2Client(const BasicH2Client&) = delete;
  BasicH2Client& operator=(const BasicH2Client&) = delete;

  // Opens a request stream with exactly `headers` (pseudo-headers included).
  // `body` is sent after them, in DATA frames of at most `max_frame` bytes
  // (0 = as large as allowed); with `end` the request is complete, otherwise
  // send() adds more later. Throws std::runtime_error when nghttp2 refuses.
  int32_t request(const HeaderList& headers, std::string body, bool end,
                  std::size_t max_frame = 0) {
    std::vector<nghttp2_nv> nva;
    nva.reserve(headers.size());
    for (const auto& [n, v] : headers) {
      // nghttp2 copies name and value during submit (no NO_COPY flags).
      nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                     reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    nghttp2_data_provider provider{};
    provider.read_callback = &read_body;
    const bool headers_only = body.empty() && end;
    const int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                              headers_only ? nullptr : &provider, nullptr);
    if (id < 0) {
      throw std::runtime_error(std::string("nghttp2_submit_request: ") + nghttp2_strerror(id));
    }
    auto& s = streams[id];
    s.pending = std::move(body);
    s.max_frame = max_frame;
    s.eof = end;
    ++open_;
    return id;
  }

  // A gRPC POST to `path` with the standard request headers plus `extra`.
  int32_t grpc_call(std::string path, std::string body, bool end = true, HeaderList extra = {}) {
    HeaderList h = {{":method", "POST"},
                    {":scheme", "http"},
                    {":authority", "localhost"},
                    {":path", std::move(path)},
                    {"content-type", "application/grpc"},
                    {"te", "trailers"}};
    for (auto& e : extra) h.push_back(std::move(e));
    return request(h, std::move(body), end);
  }

  // Adds request body bytes (and END_STREAM with `end`).
  void send(int32_t id, std::string_view bytes, bool end, std::size_t max_frame = 0) {
    auto& s = streams[id];
    s.pending.append(bytes);
    s.eof = end;
    if (max_frame > 0) s.max_frame = max_frame;
    if (s.deferred) {
      s.deferred = false;
      nghttp2_session_resume_data(session_, id);
    }
  }

  // Sends RST_STREAM with `error_code` (8 = CANCEL).
  void reset(int32_t id, uint32_t error_code) {
    auto& s = streams[id];
    s.reset = true;
    s.close_error_code = error_code;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, error_code);
  }
  void cancel(int32_t id) { reset(id, NGHTTP2_CANCEL); }

  // Client output bytes (everything nghttp2 has to send now). An nghttp2
  // failure marks the connection lost.
  std::string take_output() {
    std::string out;
    for (;;) {
      const uint8_t* p = nullptr;
      const auto n = nghttp2_session_mem_send(session_, &p);
      if (n < 0) lose_connection();
      if (n <= 0) break;
      out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    }
    return out;
  }
  // Feeds server bytes; returns nghttp2's result (< 0 = connection error,
  // which marks the connection lost).
  long receive(std::string_view bytes) {
    const auto rv = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (rv < 0) lose_connection();
    return static_cast<long>(rv);
  }

  // True once nghttp2 failed or lose_connection() was called.
  bool connection_lost() const { return lost_; }
  // The connection is gone: nothing more arrives on any stream.
  void lose_connection() {
    lost_ = true;
    for (auto& [id, s] : streams) {
      if (!s.closed) {
        s.closed = true;
        s.connection_lost = true;
      }
    }
    open_ = 0;
  }

  // True when nghttp2 has frames to send.
  bool wants_write() const { return nghttp2_session_want_write(session_) != 0; }
  // Streams opened and not yet closed.
  std::size_t open_streams() const { return open_; }
  // The server's SETTINGS_MAX_CONCURRENT_STREAMS (UINT32_MAX when unset).
  uint32_t remote_max_concurrent_streams() const {
    return nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  }
  nghttp2_session* raw() { return session_; }

  std::map<int32_t, Stream> streams;
  bool goaway_received = false;
  int32_t goaway_last_stream = -1;
  uint32_t goaway_error = 0;
  uint32_t server_max_concurrent = 0;  // from the server's first SETTINGS; 0 = not sent

 private:
  static BasicH2Client& self(void* u) { return *static_cast<BasicH2Client*>(u); }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       std::size_t namelen, const uint8_t* value, std::size_t valuelen, uint8_t,
                       void* u) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto& s = self(u).streams[frame->hd.stream_id];
    std::pair<std::string, std::string> f(
        std::string(reinterpret_cast<const char*>(name), namelen),
        std::string(reinterpret_cast<const char*>(value), valuelen));
    (frame->headers.cat == NGHTTP2_HCAT_HEADERS ? s.trailers : s.headers).push_back(std::move(f));
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* u) {
    auto& c = self(u);
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        ++c.streams[frame->hd.stream_id].header_blocks;
        if (end) c.streams[frame->hd.stream_id].remote_ended = true;
        break;
      case NGHTTP2_DATA:
        if (end) c.streams[frame->hd.stream_id].remote_ended = true;
        break;
      case NGHTTP2_RST_STREAM: {
        auto& s = c.streams[frame->hd.stream_id];
        s.rst_received = true;
        s.reset = true;
        s.close_error_code = frame->rst_stream.error_code;
        break;
      }
      case NGHTTP2_GOAWAY:
        c.goaway_received = true;
        c.goaway_last_stream = frame->goaway.last_stream_id;
        c.goaway_error = frame->goaway.error_code;
        break;
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) != 0) break;
        for (std::size_t i = 0; i < frame->settings.niv; ++i) {
          if (frame->settings.iv[i].settings_id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS) {
            c.server_max_concurrent = frame->settings.iv[i].value;
          }
        }
        break;
      default:
        break;
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, std::size_t len,
                           void* u) {
    self(u).streams[id].body.append(reinterpret_cast<const char*>(d), len);
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t code, void* u) {
    auto& c = self(u);
    auto& s = c.streams[id];
    if (s.closed) return 0;
    s.closed = true;
    if (!s.reset) s.close_error_code = code;
    if (c.open_ > 0) --c.open_;
    s.pending.clear();
    return 0;
  }

  static ssize_t read_body(nghttp2_session*, int32_t id, uint8_t* buf, std::size_t len,
                           uint32_t* flags, nghttp2_data_source*, void* u) {
    auto& s = self(u).streams[id];
    const std::size_t left = s.pending.size() - s.pending_offset;
    if (left == 0 && !s.eof) {
      s.deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    std::size_t n = std::min(len, left);
    if (s.max_frame > 0) n = std::min(n, s.max_frame);
    std::memcpy(buf, s.pending.data() + s.pending_offset, n);
    s.pending_offset += n;
    if (s.pending_offset == s.pending.size()) {
      // Consumed bytes are dropped so a long-lived stream does not keep them.
      s.pending.clear();
      s.pending_offset = 0;
      if (s.eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
  }

  static ssize_t on_read_length(nghttp2_session*, uint8_t, int32_t, int32_t session_window,
                                int32_t stream_window, uint32_t remote_max_frame, void*) {
    const int64_t n = std::min<int64_t>({session_window, stream_window, remote_max_frame});
    return static_cast<ssize_t>(std::max<int64_t>(n, 1));
  }

  nghttp2_session* session_ = nullptr;
  std::size_t open_ = 0;
  bool lost_ = false;
};

}  // namespace ic::test
