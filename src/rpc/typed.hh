#pragma once
// Typed method adapters over CallHandler for protobuf request types: parse,
// count, and hand the decoded request to a function. An undecodable message
// finishes the call with INVALID_ARGUMENT (docs/contract.md).

#include <span>
#include <type_traits>
#include <utility>

#include "rpc/call.hh"
#include "rpc/message_pool.hh"

namespace ic::rpc {

// Parses `bytes` into `out`; on failure finishes `call` with INVALID_ARGUMENT
// and returns false.
template <typename Request>
bool parse_request(std::span<const std::byte> bytes, Request& out, CallHandle& call) {
  if (out.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return true;
  call.finish({StatusCode::kInvalidArgument, "request message does not decode as " +
                                                 std::string(Request::descriptor()->full_name())});
  return false;
}

// The INTERNAL statuses of a unary request with more than one message or
// none before half-close (as grpc-java/grpc-go servers answer).
inline Status extra_unary_message() {
  return {StatusCode::kInternal, "more than one request message for a unary request"};
}
inline Status missing_unary_message() {
  return {StatusCode::kInternal, "no request message before half-close"};
}

// One request message then half-close; `fn(CallHandle, Request&&)` runs at
// half-close and answers through the handle (now or later). A second message
// or none at all is INTERNAL (as grpc-java/grpc-go servers answer). The
// request message comes from this core's MessagePool and goes back to it
// with the handler: parsing reuses the previous calls' storage.
template <typename Request, typename Fn>
class SingleRequestHandler final : public CallHandler {
 public:
  SingleRequestHandler(CallHandle call, Fn fn)
      : call_(std::move(call)), fn_(std::move(fn)), request_(message_pool<Request>().take()) {}
  ~SingleRequestHandler() override {
    message_pool<Request>().give(std::move(request_), wire_bytes_);
  }
  SingleRequestHandler(const SingleRequestHandler&) = delete;
  SingleRequestHandler& operator=(const SingleRequestHandler&) = delete;

  void on_message(std::span<const std::byte> message) override {
    if (have_) {
      call_.finish(extra_unary_message());
      return;
    }
    wire_bytes_ = message.size();
    have_ = parse_request(message, *request_.message, call_);
  }
  void on_half_close() override {
    if (!have_) {
      call_.finish(missing_unary_message());
      return;
    }
    // A function that takes the handle by value gets it moved: nothing of this
    // handler answers after half-close, and a copy would cost two atomic
    // updates of the call's weak count.
    if constexpr (std::is_invocable_v<Fn&, CallHandle&&, Request&&>) {
      fn_(std::move(call_), std::move(*request_.message));
    } else {
      fn_(call_, std::move(*request_.message));
    }
  }

 private:
  CallHandle call_;
  Fn fn_;
  typename MessagePool<Request>::Lease request_;
  std::size_t wire_bytes_ = 0;  // of the parsed message: decides whether it is pooled
  bool have_ = false;
};

// A Method whose handler takes exactly one Request (unary or server-streaming).
template <typename Request, typename Fn>
Method single_request_method(CallKind kind, Fn fn, bool handles_deadline = false) {
  Method m;
  m.kind = kind;
  m.handles_deadline = handles_deadline;
  m.make = [fn = std::move(fn)](CallHandle call) -> std::unique_ptr<CallHandler> {
    return std::make_unique<SingleRequestHandler<Request, Fn>>(std::move(call), fn);
  };
  return m;
}

}  // namespace ic::rpc
