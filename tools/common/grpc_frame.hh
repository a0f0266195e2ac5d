// gRPC length-prefixed message framing (gRPC over HTTP/2 spec, "Length-Prefixed-Message"):
// 1 byte compressed flag + 4-byte big-endian length + message, written and read by the
// server's own framing (src/rpc/framing.hh). Used by the nghttp2 clients (bench, kvevents),
// which speak gRPC without grpc++.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include <google/protobuf/message_lite.h>

#include "rpc/framing.hh"

namespace ic::tools {

// Appends one uncompressed frame holding `message` to *out.
void append_grpc_frame(const google::protobuf::MessageLite& message, std::string* out);

// Incremental decoder: DATA chunks in, whole messages out (boundaries are independent).
class GrpcFrameDecoder {
 public:
  // Bytes larger than this in one message make feed() fail (default 4 MiB, the server's limit).
  explicit GrpcFrameDecoder(std::uint32_t max_message_bytes = 4u << 20)
      : reader_(max_message_bytes) {}

  // Appends a chunk. Returns false if a frame is compressed or longer than the limit (checked
  // on its 5-byte prefix, before its bytes are buffered); every later call fails too.
  bool feed(std::string_view chunk);
  // Moves the next complete message payload into *message; false when none is complete.
  bool next(std::string* message);
  // Messages handed out by next() so far.
  std::uint64_t messages() const { return messages_; }

 private:
  rpc::MessageReader reader_;
  std::deque<std::string> complete_;  // messages fed whole, not yet taken by next()
  std::uint64_t messages_ = 0;
};

}  // namespace ic::tools
