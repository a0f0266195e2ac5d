#include "rpc/server_calls.hh"

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <cstring>

#include "base/log.hh"
#include "metrics/registry.hh"
#include "rpc/call_state.hh"
#include "rpc/peer_limit_metrics.hh"
#include "rpc/timeout.hh"

namespace ic::rpc {
namespace {

constexpr std::string_view kContentType = "application/grpc";

// application/grpc, application/grpc+proto, application/grpc;charset=… are
// gRPC (PROTOCOL-HTTP2.md Content-Type); anything else is HTTP 415.
bool is_grpc_content_type(std::string_view v) {
  if (v.substr(0, kContentType.size()) != kContentType) return false;
  return v.size() == kContentType.size() || v[kContentType.size()] == '+' ||
         v[kContentType.size()] == ';';
}

Status frame_error_status(FrameError e, std::size_t limit) {
  switch (e) {
    case FrameError::kTooLarge:
      return {StatusCode::kResourceExhausted,
              "request message larger than max (" + std::to_string(limit) + " bytes)"};
    case FrameError::kCompressed:
      return {StatusCode::kUnimplemented, "compressed messages are not supported (identity only)"};
    case FrameError::kBadFlag:
      return {StatusCode::kInternal, "invalid compressed flag in message prefix"};
    case FrameError::kNone:
      break;
  }
  return {StatusCode::kInternal, "framing error"};
}

}  // namespace

std::unique_ptr<h2::ServerSession> make_server_session(net::Connection& connection,
                                                       const ServerContext& context) {
  return std::make_unique<h2::ServerSession>(
      connection, context.options.h2,
      [&context](h2::ServerSession& h2) { return std::make_unique<ServerCalls>(h2, context); });
}

ServerCalls::ServerCalls(h2::ServerSession& h2, const ServerContext& context)
    : h2_(h2), context_(context) {}

ServerCalls::~ServerCalls() {
  for (auto& [id, call] : calls_) {
    if (call->deadline_timer) context_.timers->cancel_timer(*call->deadline_timer);
  }
}

void ServerCalls::on_shutdown() {
  std::vector<std::shared_ptr<detail::CallState>> live;
  for (auto& [id, call] : calls_) live.push_back(call);
  for (auto& call : live) {
    if (!call->finished) call->handler->on_shutdown();
  }
}

namespace {
// A call waits for the peer while its request is open and either a message is
// half-received or the method takes exactly one request message.
bool waits_for_body(const detail::CallState& call) {
  if (call.finished || call.request_ended) return false;
  if (call.reader.mid_message()) return true;
  const CallKind kind = call.method->kind;
  return kind == CallKind::kUnary || kind == CallKind::kServerStreaming;
}
}  // namespace

net::PeerWaitState ServerCalls::peer_wait(std::int64_t now_us) {
  net::PeerWaitState w;
  for (auto& [id, call] : calls_) {
    detail::CallState& c = *call;
    if (!waits_for_body(c)) {
      c.wait_since = -1;
      continue;
    }
    if (c.wait_since < 0 || c.wait_mark != c.messages_in) {
      c.wait_since = now_us;
      c.wait_mark = c.messages_in;
    }
    if (w.kind == net::PeerWait::kNothing || c.wait_since < w.since_us) {
      w = {net::PeerWait::kMessageBody, c.wait_since};
    }
  }
  return w;
}

void ServerCalls::on_limit_hit(h2::LimitHit hit) { count_peer_limit_hit(hit); }

void ServerCalls::reject(h2::StreamId id, const Status& status) {
  const std::string message = percent_encode_message(status.message);
  std::vector<h2::HeaderView> headers = {{":status", "200"},
                                         {"content-type", kContentType},
                                         {"grpc-accept-encoding", "identity"},
                                         {"grpc-status", status_digits(status.code)}};
  if (!message.empty()) headers.push_back({"grpc-message", message});
  h2_.respond(id, headers, true);
}

void ServerCalls::on_request(h2::StreamId id, std::span<const h2::HeaderView> headers) {
  metrics::local().stream_opened();
  std::string_view method, path, content_type, timeout;
  for (const auto& h : headers) {
    if (h.name == ":method")
      method = h.value;
    else if (h.name == ":path")
      path = h.value;
    else if (h.name == "content-type")
      content_type = h.value;
    else if (h.name == "grpc-timeout")
      timeout = h.value;
  }
  if (method != "POST") {
    const h2::HeaderView r[] = {{":status", "405"}, {"allow", "POST"}};
    h2_.respond(id, r, true);
    return;
  }
  if (!is_grpc_content_type(content_type)) {
    const h2::HeaderView r[] = {{":status", "415"}, {"accept", "application/grpc"}};
    h2_.respond(id, r, true);
    return;
  }
  const Method* m = context_.methods->find(path);
  if (m == nullptr) {
    reject(id, {StatusCode::kUnimplemented, "unknown method " + std::string(path)});
    return;
  }
  auto call =
      std::make_shared<detail::CallState>(*this, id, *m, context_.options.max_message_bytes);
  calls_.emplace(id, call);
  if (m->rpc != nullptr) {
    metrics::RpcMetrics::started(*m->rpc);
    call->started_us = context_.timers->now_us();
  }
  call->handler = m->make(CallHandle(call));
  if (!timeout.empty()) {
    if (const auto us = parse_grpc_timeout_us(timeout)) arm_deadline(call, *us);
  }
}

void ServerCalls::arm_deadline(const std::shared_ptr<detail::CallState>& call,
                               std::int64_t timeout_us) {
  call->deadline_us = context_.timers->now_us() + timeout_us;
  std::weak_ptr<detail::CallState> weak = call;
  call->deadline_timer = context_.timers->add_timer(timeout_us, [weak] {
    const auto s = weak.lock();
    if (!s || s->finished) return;
    s->deadline_timer.reset();
    s->calls->cancel_call(*s, {StatusCode::kDeadlineExceeded, "deadline exceeded"});
  });
}

void ServerCalls::on_request_data(h2::StreamId id, std::span<const std::byte> data) {
  const auto it = calls_.find(id);
  if (it == calls_.end()) return;
  const std::shared_ptr<detail::CallState> call = it->second;
  if (call->finished) return;
  const std::size_t before = call->reader.buffered_bytes();
  while (const auto message = call->reader.next(data)) {
    ++call->messages_in;
    if (!call->finished) call->handler->on_message(*message);
  }
  const FrameError err = call->reader.error();
  buffered_ = buffered_ - before + call->reader.buffered_bytes();
  if (err == FrameError::kTooLarge) log_message_limit(*call);
  if (err != FrameError::kNone && !call->finished) {
    cancel_call(*call, frame_error_status(err, context_.options.max_message_bytes));
  } else if (buffered_ > context_.options.max_connection_buffered_bytes && !call->finished) {
    cancel_call(*call,
                {StatusCode::kResourceExhausted,
                 "connection holds too many partial messages (max " +
                     std::to_string(context_.options.max_connection_buffered_bytes) + " bytes)"});
  }
}

void ServerCalls::on_request_end(h2::StreamId id) {
  const auto it = calls_.find(id);
  if (it == calls_.end()) return;
  const std::shared_ptr<detail::CallState> call = it->second;
  call->request_ended = true;
  if (call->finished) return;
  if (call->reader.mid_message()) {
    cancel_call(*call, {StatusCode::kInternal, "stream ended inside a message"});
    return;
  }
  if (call->method->handles_deadline && call->deadline_timer) {
    // The request is complete: from here the handler answers a late call.
    context_.timers->cancel_timer(*call->deadline_timer);
    call->deadline_timer.reset();
  }
  call->handler->on_half_close();
}

void ServerCalls::on_stream_close(h2::StreamId id, std::uint32_t) {
  metrics::local().stream_closed();
  const auto it = calls_.find(id);
  if (it == calls_.end()) return;
  const std::shared_ptr<detail::CallState> call = std::move(it->second);
  calls_.erase(it);
  buffered_ -= call->reader.buffered_bytes();
  if (call->deadline_timer) context_.timers->cancel_timer(*call->deadline_timer);
  call->deadline_timer.reset();
  if (!call->finished) {
    call->finished = true;
    record_handled(*call, StatusCode::kCancelled);
    call->handler->on_cancel();
  }
  // `call` dies here unless a handler method is on the stack; CallHandles expire.
}

void ServerCalls::send_headers_once(detail::CallState& call) {
  if (call.headers_sent) return;
  call.headers_sent = true;
  const h2::HeaderView r[] = {
      {":status", "200"}, {"content-type", kContentType}, {"grpc-accept-encoding", "identity"}};
  h2_.respond(call.id, r, false);
}

bool ServerCalls::send_message(detail::CallState& call,
                               const google::protobuf::MessageLite& message) {
  if (call.finished) return false;
  send_headers_once(call);
  const std::size_t size = message.ByteSizeLong();
  scratch_.clear();
  append_frame_header(scratch_, static_cast<std::uint32_t>(size));
  scratch_.resize(kFrameHeaderBytes + size);
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(scratch_.data()) +
                                          kFrameHeaderBytes);
  // The framed message becomes the stream's buffer (no copy); nghttp2 then
  // writes it behind the DATA frame header into the connection's output.
  return h2_.write_buffer(call.id, scratch_);
}

bool ServerCalls::send_frames(detail::CallState& call, std::span<const std::byte> frames) {
  if (call.finished) return false;
  send_headers_once(call);
  const bool ok = h2_.write(call.id, frames);
  return ok;
}

void ServerCalls::send_headers(detail::CallState& call) {
  if (call.finished || call.headers_sent) return;
  send_headers_once(call);
}

std::size_t ServerCalls::unsent_bytes(const detail::CallState& call) {
  return h2_.unsent_bytes(call.id);
}

void ServerCalls::log_message_limit(const detail::CallState& call) {
  // A misconfigured client sends every request over the limit: one line per
  // 10 s across all cores, the rest counted.
  static base::LogRateLimit limit(10'000'000);
  std::uint64_t suppressed = 0;
  if (!limit.allow(base::log_clock_us(), &suppressed)) return;
  base::log(base::LogLevel::warn, "message limit hit: call refused",
            {{"peer", h2_.connection().peer()},
             {"method", call.method->path},
             {"max_message_bytes", context_.options.max_message_bytes},
             {"suppressed", suppressed}});
}

void ServerCalls::record_handled(const detail::CallState& call, StatusCode code) {
  if (call.method->rpc == nullptr) return;
  metrics::RpcMetrics::handled(*call.method->rpc, static_cast<std::size_t>(code),
                               context_.timers->now_us() - call.started_us);
}

void ServerCalls::finish_call(detail::CallState& call, const Status& status) {
  if (call.finished) return;
  call.finished = true;
  record_handled(call, status.code);
  if (!status.is_ok() && base::log_enabled(base::LogLevel::debug)) {
    base::log(base::LogLevel::debug, "call failed",
              {{"peer", h2_.connection().peer()},
               {"method", call.method->path},
               {"grpc_code", status_name(status.code)},
               {"grpc_message", status.message}});
  }
  if (call.deadline_timer) {
    context_.timers->cancel_timer(*call.deadline_timer);
    call.deadline_timer.reset();
  }
  if (!call.headers_sent) {
    call.headers_sent = true;
    reject(call.id, status);
  } else if (status.message.empty()) {  // every OK answer: nothing to encode or allocate
    const h2::HeaderView trailers[] = {{"grpc-status", status_digits(status.code)}};
    end_response(call, status, trailers);
  } else {
    const std::string message = percent_encode_message(status.message);
    const h2::HeaderView trailers[] = {{"grpc-status", status_digits(status.code)},
                                       {"grpc-message", message}};
    end_response(call, status, trailers);
  }
}

void ServerCalls::end_response(const detail::CallState& call, const Status& status,
                               std::span<const h2::HeaderView> trailers) {
  // An error status ends the call: response bytes its client has not taken
  // are of no use to it, and trailers queued behind them would wait for a
  // window that a client that does not read never opens, holding the stream
  // and its buffer until the idle timeout (a subscriber ended for not
  // reading). So the trailers go out at once.
  if (!status.is_ok()) {
    h2_.finish_now(call.id, trailers);
  } else {
    h2_.finish(call.id, trailers);
  }
}

void ServerCalls::cancel_call(detail::CallState& call, const Status& status) {
  finish_call(call, status);
  call.handler->on_cancel();
}

// CallHandle: the handler's weak reference into its connection's ServerCalls.

bool CallHandle::alive() const { return !state_.expired() && !call_->finished; }

bool CallHandle::write(const google::protobuf::MessageLite& message) {
  const auto s = state_.lock();
  if (!s || s->finished) return false;
  return s->calls->send_message(*s, message);
}

bool CallHandle::send_headers() {
  const auto s = state_.lock();
  if (!s || s->finished) return false;
  s->calls->send_headers(*s);
  return true;
}

bool CallHandle::write_frames(std::span<const std::byte> frames) {
  const auto s = state_.lock();
  if (!s || s->finished) return false;
  return s->calls->send_frames(*s, frames);
}

std::size_t CallHandle::unsent_bytes() const {
  const auto s = state_.lock();
  return s ? s->calls->unsent_bytes(*s) : 0;
}

void CallHandle::finish(const Status& status) {
  const auto s = state_.lock();
  if (!s || s->finished) return;
  s->calls->finish_call(*s, status);
}

void CallHandle::reply(const google::protobuf::MessageLite& message) {
  // One lock of the call's state for both halves (each lock is two atomic
  // operations on the shared count, and this is every unary answer).
  const auto s = state_.lock();
  if (!s || s->finished) return;
  if (s->calls->send_message(*s, message)) s->calls->finish_call(*s, Status::ok());
}

std::optional<std::int64_t> CallHandle::deadline_us() const {
  if (state_.expired()) return std::nullopt;
  return call_->deadline_us;
}

unsigned CallHandle::core() const {
  const auto s = state_.lock();
  return s ? s->calls->core() : 0;
}

}  // namespace ic::rpc
