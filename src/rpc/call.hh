#pragma once
// Server-side calls: what a method handler sees (CallHandler), how it answers
// (CallHandle), and the method table keyed by HTTP/2 :path
// ("/package.Service/Method", grpc/doc/PROTOCOL-HTTP2.md).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rpc/status.hh"

namespace google::protobuf {
class MessageLite;
}

namespace ic::metrics {
struct RpcSeries;
}

namespace ic::rpc {

namespace detail {
struct CallState;
}

// The four gRPC call shapes.
enum class CallKind : std::uint8_t { kUnary, kClientStreaming, kServerStreaming, kBidiStreaming };

// A copyable, weak reference to one call. Handlers keep it to answer later,
// e.g. after a cross-core round trip: when the stream was reset or closed in
// the meantime every method is a safe no-op (the call's state is freed on
// stream close; the handle only holds a weak_ptr). Use it only on the
// connection's core.
class CallHandle {
 public:
  CallHandle() = default;
  explicit CallHandle(const std::shared_ptr<detail::CallState>& state)
      : state_(state), call_(state.get()) {}

  // True while the stream is open and the call not finished.
  bool alive() const;
  // Sends one response message; sends the response headers first if needed.
  // Returns false (nothing sent) when the call is gone or finished.
  bool write(const google::protobuf::MessageLite& message);
  // Sends the response headers (initial metadata) now if not sent yet, e.g.
  // to tell a streaming client its subscription is in place. False when the
  // call is gone or finished.
  bool send_headers();
  // Sends response messages already framed (rpc/framing.hh: prefix +
  // serialized message, back to back): one serialization fanned out to many
  // calls. Returns false (nothing sent) when the call is gone or finished.
  bool write_frames(std::span<const std::byte> frames);
  // Response bytes written but not yet taken by HTTP/2 flow control (a client
  // that stopped reading); 0 when gone.
  std::size_t unsent_bytes() const;
  // Ends the call: trailers with grpc-status (also for OK), or a trailers-only
  // response when nothing was sent yet. No-op when gone or finished.
  void finish(const Status& status);
  // Unary answer: write(message) then finish(OK).
  void reply(const google::protobuf::MessageLite& message);
  // The call's deadline from grpc-timeout, absolute on the Timers clock (µs);
  // nullopt when the client sent none (or the call is gone).
  std::optional<std::int64_t> deadline_us() const;
  // Index of the core that owns the connection (where completions must run).
  unsigned core() const;

 private:
  std::weak_ptr<detail::CallState> state_;
  // The state itself, read without locking by the read-only accessors: on
  // the connection's core nothing frees it between their expiry check and
  // the read (a lock is two atomic updates of the shared count).
  detail::CallState* call_ = nullptr;
};

// One call's request side, created per call by its Method. Called only on the
// connection's core, from the session's pump; it answers through its
// CallHandle (now or later).
class CallHandler {
 public:
  virtual ~CallHandler() = default;
  // One complete request message (serialized protobuf; view valid only during
  // the call). Not called after the call finished.
  virtual void on_message(std::span<const std::byte> message) = 0;
  // The client half-closed: no more messages. Not called after finish.
  virtual void on_half_close() = 0;
  // The stream was reset or closed, or the deadline passed, before the
  // handler finished; the handle is dead from now on.
  virtual void on_cancel() {}
  // The server began draining (GOAWAY sent); long-lived streams end now.
  virtual void on_shutdown() {}
};

// A registered method.
struct Method {
  CallKind kind = CallKind::kUnary;
  // true: the server's DEADLINE_EXCEEDED timer covers the call only until the
  // client half-closes (a request that never completes still times out);
  // after that the handler answers a late call itself (LookupRoute answers
  // reason_code TIMEOUT, docs/lookup.md).
  bool handles_deadline = false;
  // Builds the handler for one call.
  std::function<std::unique_ptr<CallHandler>(CallHandle)> make;
  // This core's grpc_server_* series of the method; set by MethodTable::add.
  metrics::RpcSeries* rpc = nullptr;
  // The ":path" it is registered under (for logs); set by MethodTable::add.
  std::string_view path;
};

// Methods keyed by ":path". Built once per core before serving; read-only after.
class MethodTable {
 public:
  // Registers `path` ("/pkg.Service/Method"); a second add of a path replaces
  // it. Also declares the method's grpc_server_* series in the calling
  // core's metrics (metrics::local()), so build the table on its core.
  void add(std::string path, Method method);
  // The method for `path`, or nullptr (→ UNIMPLEMENTED).
  const Method* find(std::string_view path) const;
  // Fully-qualified service names ("pkg.Service") with at least one method,
  // sorted bytewise, without duplicates.
  std::vector<std::string> service_names() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Method, Hash, std::equal_to<>> methods_;
};

}  // namespace ic::rpc
