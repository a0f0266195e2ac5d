#pragma once
// One nghttp2 server session per accepted connection: the connection's
// net::Session, sans-IO. The protocol on top (gRPC, src/rpc) is its
// Application, owned by the session and handed complete request header
// blocks, body bytes and stream ends.
//
// The pump (docs/architecture.md rule 3): on_data() feeds the bytes to
// nghttp2_session_mem_recv in slices until they are consumed or the turn's
// input budget (Limits::turn_input_*) is spent; the rest is held, reading
// paused, and fed by the next turns' flush() (docs/hostile-peers.md "Fair
// turns"). The nghttp2 callbacks only record per-stream state (headers, body
// bytes, end, close). After mem_recv returns, the recorded events are handed to
// the Application, which may answer through respond()/write()/finish(). flush()
// runs nghttp2_session_mem_send until it has nothing more, copies every chunk
// into one coalesced buffer and hands it to Connection::send once (rule 6).
// Stream state is freed only after nghttp2's stream-close callback.
//
// Library doc: https://nghttp2.org/documentation/ (1.52 API: mem_recv/mem_send).

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_allocator.hh"
#include "h2/frame_progress.hh"
#include "h2/limits.hh"
#include "net/session.hh"

struct nghttp2_session;

namespace ic::h2 {

using StreamId = std::int32_t;

// A stream's response bytes not yet sent, and the buffer a response message
// is framed in: large ones (a slow subscriber's backlog, up to its unsent
// bound) are mapped and given back when freed (base/mapped_allocator.hh).
using ResponseBytes = std::basic_string<char, std::char_traits<char>, base::MappedAllocator<char>>;

// An owned header field (response trailers kept until they are sent).
struct Header {
  std::string name;
  std::string value;
};

// One header field by view: request fields as received (lower-case names,
// RFC 9113 §8.2), valid during Application::on_request; response fields,
// valid for the call that takes them (nghttp2 copies them).
struct HeaderView {
  std::string_view name;
  std::string_view value;
};

// The protocol on top of HTTP/2 (gRPC in src/rpc). Called only from the
// session's pump and net::Session entry points, never from inside an nghttp2
// callback, so it may call the session's response methods freely. For one
// stream the calls come in the order
// on_request → on_request_data* → on_request_end? → on_stream_close.
class Application {
 public:
  virtual ~Application() = default;
  // A request header block is complete (nghttp2 has validated the
  // pseudo-headers). The views are valid only during the call.
  virtual void on_request(StreamId id, std::span<const HeaderView> headers) = 0;
  // Request body bytes, in order (view valid only during the call).
  virtual void on_request_data(StreamId id, std::span<const std::byte> data) = 0;
  // The client half-closed the stream (END_STREAM).
  virtual void on_request_end(StreamId id) = 0;
  // The stream is gone: response complete, reset by either side (`error_code`
  // is the RFC 9113 §7 code, e.g. 8 = CANCEL), or the connection closed. Last
  // call for `id`.
  virtual void on_stream_close(StreamId id, std::uint32_t error_code) = 0;
  // The peer hit a hostile-peer limit (for metrics; the session acts itself).
  virtual void on_limit_hit(LimitHit hit) { static_cast<void>(hit); }
  // Graceful shutdown began (GOAWAY queued): end long-lived work.
  virtual void on_shutdown() {}
  // The oldest thing the application waits for from the peer beyond HTTP/2
  // framing (e.g. a half-sent gRPC message), with the same stamping rule as
  // net::Session::peer_wait. The session reports the older of the two.
  virtual net::PeerWaitState peer_wait(std::int64_t now_us) {
    static_cast<void>(now_us);
    return {};
  }
};

class ServerSession;

// Builds the application of one session (called once, in the session's
// constructor; the application may keep the reference).
using ApplicationFactory = std::function<std::unique_ptr<Application>(ServerSession&)>;

class ServerSession final : public net::Session {
 public:
  // Queues our SETTINGS (from `limits`) at once and builds the application
  // with `make_app`. `connection` outlives the session.
  ServerSession(net::Connection& connection, const Limits& limits,
                const ApplicationFactory& make_app);
  ~ServerSession() override;
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // net::Session
  // Parses what this turn's input budget allows; the rest is held (reading
  // paused) and the connection asked for a flush in the next turn.
  bool on_data(std::span<const std::byte> data) override;
  // Feeds held input first when this turn's budget allows, then sends.
  void flush() override;
  void on_shutdown() override;
  // GOAWAY without Application::on_shutdown(): streams, long-lived ones
  // included, run on until they end or the connection cuts them.
  void on_max_age() override;
  // No stream open and no input held.
  bool idle() const override;
  void on_close() override;
  // Resets the streams whose request did not end (they never can).
  void on_peer_eof() override;
  // A frame or header block half-sent (kHeaderBlock), else a response held
  // by the peer's flow-control window (kFlowControl).
  net::PeerWaitState peer_wait(std::int64_t now_us) override;
  // GOAWAY ENHANCE_YOUR_CALM; counted as kHeaderTimeout / kBodyTimeout /
  // kWindowStall.
  void on_peer_deadline(net::PeerWait kind) override;

  // Response side; each returns false if the stream is unknown or already
  // answered. Called from outside the session's entry points (a timer, a
  // cross-core reply), they ask the connection for a flush. Headers first:
  // with `end_stream` the response is headers-only (e.g. gRPC
  // trailers-only); otherwise body bytes follow via write() and the response
  // ends with finish().
  bool respond(StreamId id, std::span<const HeaderView> headers, bool end_stream);
  // Appends body bytes (copied) to the stream's response.
  bool write(StreamId id, std::span<const std::byte> bytes);
  // Like write(), but adopts `bytes` (swapped with the stream's empty buffer
  // when nothing is pending, so no copy) and leaves it empty with a buffer
  // whose capacity the caller reuses.
  bool write_buffer(StreamId id, ResponseBytes& bytes);
  // Ends the response after the body written so far, with `trailers` (may be
  // empty: then the last DATA frame carries END_STREAM).
  bool finish(StreamId id, std::span<const HeaderView> trailers);
  // Ends the response now: body bytes nghttp2 has not taken (held by the
  // peer's flow-control window) are dropped, `trailers` (non-empty) go out as
  // a HEADERS frame with END_STREAM, which flow control does not hold, and
  // the stream closes once they are written (RST_STREAM NO_ERROR follows if
  // the client's side is still open). For a stream ended because its client
  // does not read: its buffers and stream slot are released at once instead
  // of waiting for a window that never opens. The client may see the message
  // it was reading cut short before the trailers.
  bool finish_now(StreamId id, std::span<const HeaderView> trailers);
  // Body bytes written to the stream and not yet taken by nghttp2 (waiting
  // for flow-control window); 0 for an unknown stream. Lets a long-lived
  // stream bound what a peer that stopped reading makes us hold.
  std::size_t unsent_bytes(StreamId id);
  // Sends RST_STREAM with `error_code` (RFC 9113 §7).
  void reset(StreamId id, std::uint32_t error_code);

  // Streams currently open (for tests and metrics).
  std::size_t open_streams() const { return streams_.size(); }
  // True once on_shutdown() queued GOAWAY.
  bool shutting_down() const { return shutting_down_; }
  // The socket side, e.g. for the peer's address and the owning core.
  net::Connection& connection() const { return conn_; }
  // The protocol on top, as built by the factory (tests inspect it).
  Application& application() const { return *app_; }

 private:
  struct Stream;
  struct Callbacks;  // the static nghttp2 callback trampolines
  friend struct Callbacks;
  // Counts the net::Session entry points on the stack: responses produced
  // inside one are flushed by it; others ask the connection (wake()).
  class Entry {
   public:
    explicit Entry(ServerSession& session) : session_(session) { ++session_.entry_depth_; }
    ~Entry() { --session_.entry_depth_; }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    ServerSession& session_;
  };

  Stream* find(StreamId id);
  // Forgets the stream; keeps it (buffers and all) for new_stream().
  void erase(StreamId id);
  // A fresh stream, reusing a finished one when there is one.
  std::unique_ptr<Stream> new_stream(StreamId id);
  // Marks a stream as having events to hand to the application.
  void mark_dirty(Stream& s);
  // Hands recorded events to the application; returns true if any ran.
  bool dispatch();
  // mem_send until empty, then one Connection::send.
  void pump_output();
  // Queues the one GOAWAY (NO_ERROR, last processed stream) of a graceful end.
  void submit_goaway();
  // Pause/resume reading around the output queue cap, and while input is held.
  void apply_backpressure();
  // Input side (session_input.cc). Feeds `data` to nghttp2 in slices until it
  // is consumed or the turn's budget is spent: the bytes consumed, or -1
  // after a fatal nghttp2 error (recv_error_).
  std::ptrdiff_t receive(std::span<const std::byte> data);
  // Feeds the held input as far as the budget allows; false after a fatal
  // error (reported by fail_input()).
  bool receive_held();
  // In flush(): receive_held() unless this turn's budget is already spent.
  bool resume_input();
  // After flush(): the turn is over, its budget renewed; held input asks
  // for the next turn.
  void end_input_turn();
  bool input_budget_spent() const;
  // A fatal mem_recv error: GOAWAY ENHANCE_YOUR_CALM for our own limits
  // (nghttp2 queued its GOAWAY for protocol errors); held input dropped.
  void fail_input();
  // Queues GOAWAY ENHANCE_YOUR_CALM (once) and reports `hit`.
  void calm_down(LimitHit hit);
  // True when some answered stream has body bytes the peer's window blocks.
  bool window_blocked() const;
  // Counts a decoded header field of the current block; false once the
  // block is an HPACK bomb (docs/hostile-peers.md "Costly peers").
  bool count_decoded(std::size_t field_bytes);
  // Refills the PING/SETTINGS and rapid-reset buckets at a watchdog sample.
  void refill_tokens(std::int64_t now_us);
  // Asks the connection for a flush unless an entry point is running (its
  // flush follows anyway).
  void wake();

  net::Connection& conn_;
  Limits limits_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<StreamId, std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Stream>> spare_streams_;  // finished, for reuse
  std::vector<StreamId> dirty_;
  std::vector<StreamId> rst_after_end_;  // answered while the client still sends
  std::vector<std::byte> out_;           // coalesced output of one flush
  // find()'s cache of open streams, direct-mapped by stream id: a client's
  // concurrent streams have consecutive odd ids, so they fall in distinct
  // slots and nghttp2's several callbacks per stream skip the hash map. A
  // slot holds an open stream or nullptr (erase clears it).
  static constexpr std::size_t kRecentSlots = 64;
  static std::size_t recent_slot(StreamId id) {
    return (static_cast<std::uint32_t>(id) >> 1) % kRecentSlots;
  }
  std::array<Stream*, kRecentSlots> recent_{};
  std::vector<HeaderView> header_views_;  // reused by dispatch()
  std::vector<StreamId> dispatch_ids_;
  std::string dispatch_body_;
  // Hostile-peer accounting (docs/hostile-peers.md).
  FrameProgress progress_;                 // frame boundaries of the input
  std::vector<std::byte> held_in_;         // received, left for the next turn
  std::size_t held_off_ = 0;               // bytes of held_in_ already parsed
  std::uint32_t turn_frames_ = 0;          // frames begun this turn
  std::uint32_t turn_streams_ = 0;         // request streams opened this turn
  std::uint64_t turn_header_bytes_ = 0;    // header bytes decoded this turn
  std::uint64_t turn_bytes_ = 0;           // input bytes parsed this turn
  std::ptrdiff_t recv_error_ = 0;          // the last fatal mem_recv result
  std::uint64_t block_decoded_bytes_ = 0;  // its decoded fields, +32 each
  std::uint32_t rejected_blocks_ = 0;      // 431 answers so far
  std::int64_t unit_wait_since_ = -1;      // first sample of the half-sent unit
  std::uint64_t unit_wait_mark_ = 0;       // progress_.units() at that sample
  std::int64_t window_wait_since_ = -1;    // first sample of a window-blocked answer
  bool calm_ = false;                      // our GOAWAY ENHANCE_YOUR_CALM is queued
  bool bomb_ = false;                      // on_header stopped an HPACK bomb
  // PING/SETTINGS (Limits::control_frame_*) and rapid-reset (Limits::reset_*)
  // buckets; flooded: on_frame_recv stopped that flood.
  TokenBucket control_tokens_;
  TokenBucket reset_tokens_;
  std::int64_t last_refill_us_ = -1;  // watchdog sample that last refilled them
  bool in_nghttp2_ = false;           // guards against re-entry (rule 3)
  int entry_depth_ = 0;               // net::Session entry points running
  bool paused_ = false;               // reading paused (output_full_ or input held)
  bool output_full_ = false;          // output over its cap, not yet drained to half
  bool shutting_down_ = false;
  bool goaway_sent_ = false;  // by on_shutdown() or on_max_age()
  bool closed_ = false;
  // Last member: built after the session is complete, destroyed first.
  std::unique_ptr<Application> app_;
};

}  // namespace ic::h2
