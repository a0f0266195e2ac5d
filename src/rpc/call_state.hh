#pragma once
// Internal: the per-call state ServerCalls keeps for one stream. Owned by it
// (shared_ptr) and erased on stream close; CallHandles hold weak_ptrs.

#include <cstdint>
#include <memory>
#include <optional>

#include "h2/server_session.hh"
#include "rpc/call.hh"
#include "rpc/framing.hh"
#include "rpc/timers.hh"

namespace ic::rpc {
class ServerCalls;
}

namespace ic::rpc::detail {

struct CallState {
  CallState(ServerCalls& owner, h2::StreamId stream, const Method& m, std::size_t max_message_bytes)
      : calls(&owner), id(stream), method(&m), reader(max_message_bytes) {}

  ServerCalls* calls;
  h2::StreamId id;
  const Method* method;
  MessageReader reader;
  std::unique_ptr<CallHandler> handler;
  std::optional<std::int64_t> deadline_us;
  std::optional<Timers::TimerId> deadline_timer;
  std::int64_t started_us = 0;  // Timers clock, for grpc_server_handling_seconds
  bool headers_sent = false;
  bool finished = false;
  // Request progress for the message-body deadline (ServerCalls::peer_wait).
  bool request_ended = false;
  std::uint64_t messages_in = 0;  // complete request messages so far
  std::int64_t wait_since = -1;   // first sample of the current wait, µs
  std::uint64_t wait_mark = 0;    // messages_in at that sample
};

}  // namespace ic::rpc::detail
