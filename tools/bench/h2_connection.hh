// One gRPC-over-HTTP/2 client connection on libnghttp2's client API (nghttp2 1.52:
// nghttp2_session_client_new, nghttp2_submit_request, nghttp2_session_mem_recv / mem_send),
// over a non-blocking TCP socket that the owning thread's epoll (or poll) loop drives. Unary calls
// and client-streaming calls (ReportCacheState; nghttp2's deferred data provider) share it: the
// bench and inferencecache-kvevents (docs/kvevents.md "Delivery") use it. Single-threaded:
// a connection lives on the thread that created it. nghttp2 is never re-entered from its own
// callbacks: they only record state; pump() does recv → callbacks → send.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ic::tools::bench {

// How a call ended, as the client saw it.
struct CallOutcome {
  std::int64_t intended_ns = 0;  // when the call was meant to start (open loop: the schedule)
  std::int64_t done_ns = 0;      // stream closed (monotonic clock)
  // "OK", a gRPC status name ("UNAVAILABLE"), "http-<status>", "reset-<h2 error>",
  // "no-grpc-status" or "connection-lost".
  std::string status;
  std::string response;   // the first response message payload (unframed), "" if none
  std::uint64_t tag = 0;  // the caller's tag from start() / open_stream()
};

class H2Connection {
 public:
  // Called once per call when its stream closes (from inside pump(); must not call back in).
  using OnDone = std::function<void(CallOutcome&&)>;

  // Connects (blocking, up to timeout_ms) to host:port, then switches the socket to
  // non-blocking and queues the HTTP/2 preface and SETTINGS. Throws std::runtime_error with
  // "cannot connect to HOST:PORT: <strerror>" when the server is not there.
  H2Connection(const std::string& host, int port, int timeout_ms, OnDone on_done);
  // Defaulted where Stream is complete; the members own the socket, the session and the streams.
  ~H2Connection();
  // nghttp2 keeps `this` as the session's user data: a connection never moves (nor copies).
  H2Connection(H2Connection&&) = delete;

  // The socket, for the owner's epoll set.
  int fd() const { return socket_.get(); }
  // Streams opened and not yet closed.
  int active() const { return active_; }
  // False once the connection failed or the server sent GOAWAY and all streams closed.
  bool alive() const { return alive_; }

  // Starts a unary-shaped call: POST `path` with gRPC headers and `body` (already framed, shared
  // so thousands of calls can reuse one payload), END_STREAM after it. intended_ns and tag are
  // echoed in the outcome.
  void start(const std::string& path, std::shared_ptr<const std::string> body,
             std::int64_t intended_ns, std::uint64_t tag = 0);

  // Opens a client-streaming call on `path`: its body grows with write() and ends (END_STREAM)
  // after end_writes(). Returns the stream id; -1 when nghttp2 refused it (the outcome, with
  // status "submit-<why>", has then been delivered already).
  std::int32_t open_stream(const std::string& path, std::uint64_t tag);
  // Appends already framed bytes to an open streaming call's body (no-op once it closed).
  void write(std::int32_t stream_id, std::string_view framed);
  // No more writes: END_STREAM follows what was written.
  void end_writes(std::int32_t stream_id);
  // Body bytes of a streaming call not yet handed to the socket (HTTP/2 flow control, or a full
  // socket, holds them back); 0 once the call closed.
  std::size_t unsent(std::int32_t stream_id) const;
  // The user-agent header of the calls started from now on ("inferencecache-bench" by default).
  void set_user_agent(std::string agent) { user_agent_ = std::move(agent); }
  // The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unbounded until its SETTINGS arrive).
  std::uint32_t peer_max_streams() const;

  // Reads what the socket has (EPOLLIN), feeds nghttp2, then writes what nghttp2 wants to send
  // until the socket would block. Returns false when the connection is dead; every open stream
  // has then been completed as "connection-lost".
  bool pump();
  // Writes what nghttp2 has queued (new requests, WINDOW_UPDATEs) without reading: a syscall
  // only when there are bytes. Returns false when the connection is dead (as pump()).
  bool flush();
  // True when bytes are waiting for the socket to become writable (arm EPOLLOUT).
  bool wants_write() const { return !out_.empty(); }

 private:
  struct Stream;
  // The socket descriptor, closed with the connection.
  class Socket {
   public:
    explicit Socket(int fd) : fd_(fd) {}
    ~Socket();
    Socket(Socket&&) = delete;
    int get() const { return fd_; }

   private:
    int fd_;
  };
  struct SessionDeleter {
    void operator()(nghttp2_session* session) const;
  };
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t flags, void* user);
  static int on_data(nghttp2_session*, std::uint8_t flags, std::int32_t stream_id,
                     const std::uint8_t* data, std::size_t len, void* user);
  static int on_close(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code,
                      void* user);
  std::int32_t submit(const std::string& path, std::unique_ptr<Stream> stream);
  bool read_socket();
  bool write_socket();
  void fail_all();

  Socket socket_;
  std::string authority_;
  std::string user_agent_ = "inferencecache-bench";
  std::unique_ptr<nghttp2_session, SessionDeleter> session_;
  OnDone on_done_;
  std::string out_;  // bytes from mem_send not yet written
  std::size_t out_off_ = 0;
  // Streams opened and not closed; nghttp2's stream user data points at them.
  std::unordered_map<std::int32_t, std::unique_ptr<Stream>> open_;
  int active_ = 0;
  bool alive_ = true;
};

// Monotonic clock in ns (CLOCK_MONOTONIC), the time base of every outcome.
std::int64_t now_ns();

}  // namespace ic::tools::bench
