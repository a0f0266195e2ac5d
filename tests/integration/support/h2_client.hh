#pragma once
// A raw HTTP/2 cleartext (h2c, prior knowledge) client for integration tests:
// the tests' one nghttp2 client session (tests/support/h2_client_session.hh)
// over a loopback socket. It reports exactly what the server answered
// (headers, trailers, RST_STREAM, GOAWAY). Single-threaded; one socket per
// client; every wait is bounded.

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

#include "support/h2_client_session.hh"
#include "support/loopback_socket.hh"

namespace ic::itest {

using HeaderList = test::HeaderList;

// What the server sent on one stream (test::StreamState: headers, trailers,
// body, remote_ended, closed, reset, connection_lost, close_error_code).
struct H2Response : test::StreamState {
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

// Not copyable: it owns the socket (closed when it goes) and the session.
class H2Client {
 public:
  // Connects to 127.0.0.1:`port`, sends the connection preface and SETTINGS
  // (initial stream window 16 MiB, so large responses flow without help).
  // Throws std::runtime_error when the TCP connect fails.
  explicit H2Client(uint16_t port);

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
  bool goaway_received() const { return session_.goaway_received; }
  int32_t goaway_last_stream_id() const { return session_.goaway_last_stream; }
  // Its error code (RFC 9113 §7: 0 = NO_ERROR, 11 = ENHANCE_YOUR_CALM).
  uint32_t goaway_error() const { return session_.goaway_error; }
  // True once the server closed the TCP connection (EOF or error).
  bool eof() const { return eof_; }
  // The server's SETTINGS_MAX_CONCURRENT_STREAMS (UINT32_MAX when unset).
  uint32_t remote_max_concurrent_streams() const {
    return session_.remote_max_concurrent_streams();
  }
  // Streams started and not yet closed.
  std::size_t open_streams() const { return session_.open_streams(); }

 private:
  // One round of I/O: write queued output, wait up to `budget` for input, feed it to nghttp2.
  // Returns false once the connection is unusable.
  bool pump(std::chrono::milliseconds budget);

  test::OwnedFd fd_;
  uint16_t port_;
  test::BasicH2Client<H2Response> session_;
  std::string outbuf_;  // session output not yet written to the socket
  bool eof_ = false;
};

}  // namespace ic::itest
