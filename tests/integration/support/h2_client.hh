#pragma once
// A raw HTTP/2 cleartext (h2c, prior knowledge) client on libnghttp2 for
// integration tests: it can put on the wire what a well-behaved gRPC library
// never would (compressed flags, garbage, odd DATA framing, resets), and it
// reports exactly what the server answered (headers, trailers, RST_STREAM,
// GOAWAY). Single-threaded; one socket per client; every wait is bounded.
//
// Sources: RFC 9113 (HTTP/2), nghttp2 1.52 client API (nghttp2_session_client_new,
// nghttp2_submit_request, nghttp2_session_mem_recv/mem_send), gRPC over HTTP/2
// (PROTOCOL-HTTP2.md in grpc/grpc).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct nghttp2_session;

namespace ic::itest {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// What the server sent on one stream.
struct H2Response {
  HeaderList headers;             // the first HEADERS block (":status", "content-type", ...)
  HeaderList trailers;            // a later HEADERS block (gRPC trailers); empty for trailers-only
  std::string body;               // concatenated DATA payload bytes (gRPC length-prefixed messages)
  bool remote_ended = false;      // the server sent END_STREAM (its answer is complete)
  bool closed = false;            // the stream is closed both ways (or the connection is gone)
  bool reset = false;             // RST_STREAM was sent or received on it
  bool connection_lost = false;   // the TCP connection ended before the stream closed
  uint32_t close_error_code = 0;  // HTTP/2 error code (RFC 9113 §7): 0 NO_ERROR, 8 CANCEL, ...

  // The server's answer is complete, or nothing more can arrive.
  bool done() const { return remote_ended || closed; }

  // Value of `name` in headers, then trailers (trailers-only responses put
  // grpc-status in the headers block); nullopt when absent.
  std::optional<std::string> find(std::string_view name) const;
  // ":status" as a number; 0 when no headers arrived.
  int http_status() const;
  // "grpc-status" as a number; nullopt when absent.
  std::optional<int> grpc_status() const;
  // "grpc-message", percent-decoded (gRPC PROTOCOL-HTTP2.md); "" when absent.
  std::string grpc_message() const;
};

// How to put one request body on the wire.
struct BodyPlan {
  std::string bytes;          // body bytes (usually gRPC-framed messages)
  std::size_t max_frame = 0;  // largest DATA payload per frame in bytes; 0 = as large as allowed
  bool end_stream = true;     // half-close after the bytes (false keeps the stream open)
};

class H2Client {
 public:
  // Connects to 127.0.0.1:`port`, sends the connection preface and SETTINGS
  // (initial stream window 16 MiB, so large responses flow without help).
  // Throws std::runtime_error when the TCP connect fails.
  explicit H2Client(uint16_t port);
  ~H2Client();
  H2Client(const H2Client&) = delete;
  H2Client& operator=(const H2Client&) = delete;

  // Opens a POST stream to `path` with gRPC request headers (content-type
  // application/grpc, te trailers) plus `extra` (which may override
  // content-type), and queues `body`. Returns the stream id. If the server's
  // SETTINGS_MAX_CONCURRENT_STREAMS is reached, nghttp2 holds the HEADERS until
  // a stream closes (client-side queueing).
  int32_t start(std::string_view path, const BodyPlan& body, const HeaderList& extra = {});
  // Same, with exactly `headers` (pseudo-headers included) and no defaults.
  int32_t start_raw(const HeaderList& headers, const BodyPlan& body);
  // Queues more body bytes on an open stream; `end_stream` half-closes after them.
  void send(int32_t stream_id, std::string_view bytes, bool end_stream, std::size_t max_frame = 0);
  // Sends RST_STREAM with `error_code` (8 = CANCEL).
  void reset(int32_t stream_id, uint32_t error_code = 8);

  // Drives the connection (writes queued frames, reads answers) until `done`
  // returns true, the connection ends, or `timeout` passes. Returns `done()`.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);
  // Drives until stream `id` closed; returns its response. Throws on timeout.
  const H2Response& wait(int32_t id, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Drives until every started stream closed. Returns false on timeout.
  bool wait_all(std::chrono::milliseconds timeout);
  // Writes everything queued without waiting for answers (bounded by `timeout`).
  void flush(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // The response so far for `id` (empty before anything arrived).
  const H2Response& response(int32_t id) const;
  // True once the server sent GOAWAY; last_stream_id is its value.
  bool goaway_received() const { return goaway_; }
  int32_t goaway_last_stream_id() const { return goaway_last_stream_id_; }
  // True once the server closed the TCP connection (EOF or error).
  bool eof() const { return eof_; }
  // The server's SETTINGS_MAX_CONCURRENT_STREAMS (UINT32_MAX when unset).
  uint32_t remote_max_concurrent_streams() const;
  // Streams started and not yet closed.
  std::size_t open_streams() const { return open_; }

 private:
  struct Outgoing;   // a stream's queued body bytes (h2_client.cc)
  struct Callbacks;  // nghttp2 callbacks (h2_client.cc)
  friend struct Callbacks;
  // One round of I/O: write queued output, wait up to `budget` for input, feed it to nghttp2.
  // Returns false once the connection is unusable.
  bool pump(std::chrono::milliseconds budget);

  int fd_ = -1;
  uint16_t port_;
  nghttp2_session* session_ = nullptr;
  std::string outbuf_;  // mem_send output not yet written (copied: valid only until the next call)
  std::map<int32_t, H2Response> responses_;
  std::map<int32_t, std::unique_ptr<Outgoing>> outgoing_;
  std::size_t open_ = 0;
  bool goaway_ = false;
  int32_t goaway_last_stream_id_ = 0;
  bool eof_ = false;
};

}  // namespace ic::itest
