#pragma once
// The boundary between the reactor's sockets (src/net) and the protocols that
// speak over them (src/h2 for gRPC, src/admin for HTTP/1.1). A protocol is
// sans-IO: it sees bytes in, writes bytes out through its Connection, and never
// touches a file descriptor. Both sides live on one core for the connection's
// whole life (docs/architecture.md rule 1).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace ic::net {

// What a protocol may ask of its socket. Implemented by the reactor-driven TCP
// connection in src/net and by in-memory fakes in tests.
class Connection {
 public:
  virtual ~Connection() = default;

  // Appends bytes to the ordered output queue (copied; the caller's buffer may
  // be reused at once). Sent as one gathered write per loop turn.
  virtual void send(std::span<const std::byte> bytes) = 0;
  // Queues `bytes` like send() and leaves `bytes` empty. An implementation
  // may adopt the buffer itself instead of copying it and hand back a spare
  // one whose capacity the caller reuses (TcpConnection does when its queue
  // is empty): a protocol that builds a turn's output in one buffer then
  // costs no copy on its way to the socket.
  virtual void send_buffer(std::vector<std::byte>& bytes) {
    send(bytes);
    bytes.clear();
  }
  // Bytes queued and not yet acknowledged by the kernel; protocols stop
  // producing output above their cap (docs/architecture.md rule 5).
  virtual std::size_t queued_bytes() const = 0;
  // Stops/restarts delivering on_data (backpressure on the peer).
  virtual void pause_reading() = 0;
  virtual void resume_reading() = 0;
  // Asks for Session::flush() at the end of this loop turn; used when work
  // completes outside on_data (a cross-core reply, a timer).
  virtual void request_flush() = 0;
  // Closes after the queued output is written (or at once if `abort`).
  virtual void close(bool abort = false) = 0;
  // Index of the core (reactor) that owns this connection.
  virtual unsigned core() const = 0;
  // "ip:port" of the peer, for logs.
  virtual std::string_view peer() const = 0;
};

// What a protocol is waiting for from its peer, for the connection's deadlines
// (docs/hostile-peers.md "Deadlines"). A peer that keeps one of these open past
// its deadline is cut, whatever other bytes it trickles meanwhile.
enum class PeerWait : std::uint8_t {
  kNothing,
  // A frame or a header block partly received (slowloris): the listener's
  // request_timeout_us.
  kHeaderBlock,
  // A request message partly received, or a unary request not ended: the
  // listener's request_timeout_us.
  kMessageBody,
  // A response held back by the peer's flow-control window (zero window): the
  // listener's idle_timeout_us, like output the socket cannot drain.
  kFlowControl,
};

// The oldest wait of a session: `since_us` is the connection clock's time
// (µs) at which the session first saw it.
struct PeerWaitState {
  PeerWait kind = PeerWait::kNothing;
  std::int64_t since_us = 0;
};

// One protocol instance per accepted connection.
class Session {
 public:
  virtual ~Session() = default;

  // Bytes arrived from the peer (a view valid only during the call). Returns
  // false when the connection must be closed (protocol error already sent).
  virtual bool on_data(std::span<const std::byte> data) = 0;
  // Produce pending output with Connection::send. Called once per loop turn
  // after on_data, and after request_flush(). Never re-entered.
  virtual void flush() = 0;
  // Graceful shutdown began: stop taking new requests (HTTP/2 GOAWAY), finish
  // in-flight ones.
  virtual void on_shutdown() = 0;
  // The connection reached its --max-connection-age (ListenerOptions::
  // max_connection_age_us) while the server stays up: stop taking new
  // requests (HTTP/2 GOAWAY) but let every in-flight one run, long-lived
  // streams included; the connection cuts what is left when the grace ends.
  // A later on_shutdown() (server drain) still ends long-lived work.
  virtual void on_max_age() { on_shutdown(); }
  // True when nothing is in flight, so a draining server may close it now.
  virtual bool idle() const = 0;
  // The socket is gone (peer closed, error, or close()). Called exactly once;
  // the Session is destroyed right after.
  virtual void on_close() = 0;

  // The peer closed its sending side (FIN) while the socket stays open for
  // our answers. Work that needs more bytes from the peer can never finish:
  // drop it (HTTP/2: reset streams whose request did not end) so idle() can
  // become true and the connection's slot is released.
  virtual void on_peer_eof() {}
  // Sampled by the connection about once per second (`now_us`: connection
  // clock): the oldest thing the session waits for from the peer. A session
  // stamps a wait with the first `now_us` that saw it and keeps the stamp
  // while the same unit stays incomplete.
  virtual PeerWaitState peer_wait(std::int64_t now_us) {
    static_cast<void>(now_us);
    return {};
  }
  // The connection cuts the peer for `kind` (deadline passed): queue a
  // goodbye (HTTP/2 GOAWAY) and count it; the connection then closes.
  virtual void on_peer_deadline(PeerWait kind) { static_cast<void>(kind); }
};

// Builds the protocol for a newly accepted connection on its core.
using SessionFactory = std::function<std::unique_ptr<Session>(Connection&)>;

}  // namespace ic::net
