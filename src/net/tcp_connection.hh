#pragma once
// A reactor-driven TCP connection: the src/net implementation of
// net::Connection (docs/architecture.md rules 4, 5, 6).
//
// Reading: one recv in flight, into the core's shared receive buffers (no
// buffer held while idle: Reactor::recv); re-armed after the
// Session consumed the bytes, unless reading is paused (by the Session, or by
// backpressure when the output queue is over its high-water mark).
// Writing: send() appends to a pending buffer; at the end of the turn the
// pending bytes become the in-flight buffer (so all frames of a turn go out
// in one send), written inline with send(2) first; what the socket did not
// take goes to the single send operation; a short write re-sends the rest; the
// in-flight buffer is not touched until its completion.
// Closing: stop reading, write what is queued (unless aborting), cancel what is
// in flight, wait for the last completion, then on_close(), close(2), free.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "net/session.hh"
#include "runtime/runtime.hh"

namespace ic::net {

class CoreNet;
struct ListenerState;

class TcpConnection final : public Connection, public runtime::Reactor::IoHandler {
 public:
  // Bytes read per recv when the core has no shared buffer ring.
  static constexpr std::size_t kRecvBufferBytes = 16 * 1024;

  // Takes ownership of the connected socket `fd`.
  TcpConnection(CoreNet& core, ListenerState& listener, int fd);
  ~TcpConnection() override;

  // Installs the protocol and starts reading. A null session aborts.
  void start(std::unique_ptr<Session> session);

  // net::Connection
  void send(std::span<const std::byte> bytes) override;
  // Adopts `bytes` as the pending output when nothing is pending (no copy).
  void send_buffer(std::vector<std::byte>& bytes) override;
  std::size_t queued_bytes() const override;
  void pause_reading() override;
  void resume_reading() override;
  void request_flush() override;
  void close(bool abort = false) override;
  unsigned core() const override;
  std::string_view peer() const override;

  // runtime::Reactor::IoHandler
  void on_completion(std::uint8_t op, std::int32_t res, std::uint32_t flags) override;

  // End-of-turn work, run by CoreNet for connections marked dirty: flush the
  // Session, start the send, apply backpressure, advance closing.
  void turn_end();
  // After turn_end(): true when the Session asked for a flush during its
  // flush (work it left for the next turn, e.g. input over its per-turn
  // budget); CoreNet then queues the connection for the next turn.
  bool wants_next_turn() const { return flush_wanted_ && !closing_ && !finished_; }
  // Server shutdown: on_shutdown() (GOAWAY, long-lived calls end), then close
  // once idle. Also ends the calls of a connection its age already drains.
  void begin_drain();
  // The listener that accepted it.
  const ListenerState& listener() const { return listener_; }
  // True once on_close() ran and the socket is closed; CoreNet frees it.
  bool finished() const { return finished_; }

  // Intrusive list links of CoreNet's connection list.
  TcpConnection* prev = nullptr;
  TcpConnection* next = nullptr;
  // Set while queued in CoreNet's dirty list.
  bool dirty = false;

 private:
  enum Op : std::uint8_t { kRecv = 1, kSend = 2 };

  void mark_dirty();
  // After output was queued: enforce the hard cap, schedule the send.
  void queued_output();
  void arm_recv();
  void try_send();
  // Writes the in-flight bytes with send(2) now; true when some remain for
  // the ring (EAGAIN or a short write), false when all went out or the
  // connection is being aborted.
  bool send_inline();
  void cancel_all();
  void finish();
  void apply_backpressure();
  // The watchdog: one timer per connection, every tick_us(), enforcing the
  // idle timeout, the send stall and the Session's peer deadlines.
  std::int64_t tick_us() const;
  void arm_idle_timer(std::int64_t delay_us);
  void on_idle_timer();
  // True when a Session::peer_wait deadline passed (the peer is then cut).
  bool peer_deadline_passed(std::int64_t now);
  // ListenerOptions::max_connection_age_us: GOAWAY once past the connection's
  // jittered age, abort once the grace after it is over too.
  void check_age(std::int64_t now);
  // Its age reached: on_max_age() (GOAWAY, calls run on), close once idle.
  void begin_age_drain();
  void on_recv(std::int32_t res, std::span<const std::byte> data);
  void on_send(std::int32_t res);

  CoreNet& core_;
  ListenerState& listener_;
  int fd_;
  runtime::Reactor::IoSlot slot_;
  std::unique_ptr<Session> session_;

  std::unique_ptr<std::byte[]> rbuf_;    // own read buffer when the core shares none
  std::vector<std::byte> out_inflight_;  // pointed at by the send operation
  std::size_t inflight_off_ = 0;         // bytes of out_inflight_ already sent
  std::vector<std::byte> out_pending_;   // appended by send()

  unsigned ops_ = 0;  // operations started and not completed
  bool recv_armed_ = false;
  bool send_armed_ = false;
  bool user_paused_ = false;
  bool bp_paused_ = false;
  bool flush_wanted_ = false;
  bool peer_eof_ = false;
  bool draining_ = false;       // GOAWAY sent: close once the session is idle
  bool shutting_down_ = false;  // the server drains (begin_drain), not just the age
  bool closing_ = false;
  bool aborting_ = false;
  bool cancel_sent_ = false;
  bool finished_ = false;

  std::int64_t last_active_us_ = 0;    // last byte received or sent
  std::int64_t stall_since_us_ = 0;    // output queued and no send progress since
  std::int64_t closing_since_us_ = 0;  // first watchdog tick that saw closing_
  std::int64_t age_goaway_us_ = 0;     // when its age is reached (0: no age limit)
  std::int64_t age_abort_us_ = 0;      // when its age's grace ends (0: not aged out)
  runtime::Reactor::TimerId idle_timer_ = 0;
  mutable std::string peer_;
};

}  // namespace ic::net
