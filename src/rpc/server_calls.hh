#pragma once
// The gRPC layer of one HTTP/2 connection: the h2::Application that turns
// the requests an h2::ServerSession hands up into calls of the MethodTable
// (grpc/doc/PROTOCOL-HTTP2.md, docs/contract.md "Transport rules"). The
// connection's net::Session is the h2::ServerSession below it
// (docs/architecture.md "LookupRoute path").
//
// Request checks, in order: :method POST (else HTTP 405), content-type
// application/grpc[+proto|;…] (else HTTP 415), :path in the method table (else
// trailers-only UNIMPLEMENTED), grpc-timeout → deadline (malformed: ignored).
// Request messages go through a MessageReader with the per-message limit
// (RESOURCE_EXHAUSTED), compressed flag → UNIMPLEMENTED. Every response ends
// with grpc-status in trailers (trailers-only when no message was sent).
// Open streams are counted in the core's metrics (stream_opened/closed).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "h2/server_session.hh"
#include "net/session.hh"
#include "rpc/call.hh"
#include "rpc/timers.hh"

namespace ic::rpc {

namespace detail {
struct CallState;
}

struct ServerOptions {
  // Largest request message accepted (bytes); docs/contract.md default 4 MiB.
  std::size_t max_message_bytes = 4 * 1024 * 1024;
  // Bytes of partially received messages one connection may hold across all
  // its calls (bytes); the call whose data crosses it ends with
  // RESOURCE_EXHAUSTED. Without it, 100 streams × 4 MiB of half-sent messages
  // would pin 400 MiB per connection (docs/architecture.md rule 5).
  std::size_t max_connection_buffered_bytes = 16 * 1024 * 1024;
  // HTTP/2 hostile-peer limits.
  h2::Limits h2;
};

// What every connection of one core shares. All three outlive the sessions.
struct ServerContext {
  const MethodTable* methods = nullptr;
  ServerOptions options;
  Timers* timers = nullptr;
};

// The protocol of one accepted gRPC connection: an h2::ServerSession (the
// connection's net::Session) whose application is a ServerCalls.
std::unique_ptr<h2::ServerSession> make_server_session(net::Connection& connection,
                                                       const ServerContext& context);

class ServerCalls final : public h2::Application {
 public:
  // `h2` owns this object and outlives it; `context` outlives both.
  ServerCalls(h2::ServerSession& h2, const ServerContext& context);
  ~ServerCalls() override;
  ServerCalls(const ServerCalls&) = delete;
  ServerCalls& operator=(const ServerCalls&) = delete;

  // Calls in flight (for tests and metrics).
  std::size_t active_calls() const { return calls_.size(); }

  // Used by CallHandle (same core only).
  bool send_message(detail::CallState& call, const google::protobuf::MessageLite& message);
  bool send_frames(detail::CallState& call, std::span<const std::byte> frames);
  void send_headers(detail::CallState& call);
  std::size_t unsent_bytes(const detail::CallState& call);
  void finish_call(detail::CallState& call, const Status& status);
  unsigned core() const { return h2_.connection().core(); }

 private:
  // h2::Application
  void on_request(h2::StreamId id, std::span<const h2::HeaderView> headers) override;
  void on_request_data(h2::StreamId id, std::span<const std::byte> data) override;
  void on_request_end(h2::StreamId id) override;
  void on_stream_close(h2::StreamId id, std::uint32_t error_code) override;
  void on_limit_hit(h2::LimitHit hit) override;
  // Tells every unfinished call's handler (long-lived streams end).
  void on_shutdown() override;
  // A call whose request message is half-sent (or a unary /
  // server-streaming request not ended) as kMessageBody; the oldest one.
  net::PeerWaitState peer_wait(std::int64_t now_us) override;

  // Logs (rate-limited) a request message over max_message_bytes.
  void log_message_limit(const detail::CallState& call);
  // Counts the call's end in grpc_server_handled_total / _handling_seconds.
  void record_handled(const detail::CallState& call, StatusCode code);
  // Trailers-only answer for a request that never became a call.
  void reject(h2::StreamId id, const Status& status);
  void send_headers_once(detail::CallState& call);
  // Trailers after a response body: behind the body for OK, or at once
  // (unsent body dropped, h2::ServerSession::finish_now) for an error.
  void end_response(const detail::CallState& call, const Status& status,
                    std::span<const h2::HeaderView> trailers);
  void arm_deadline(const std::shared_ptr<detail::CallState>& call, std::int64_t timeout_us);
  // Ends `call` with `status` and tells its handler it is cancelled.
  void cancel_call(detail::CallState& call, const Status& status);

  h2::ServerSession& h2_;
  const ServerContext& context_;
  std::unordered_map<h2::StreamId, std::shared_ptr<detail::CallState>> calls_;
  h2::ResponseBytes scratch_;  // one framed response message (swapped into its stream)
  std::size_t buffered_ = 0;   // sum of the calls' MessageReader::buffered_bytes()
};

}  // namespace ic::rpc
