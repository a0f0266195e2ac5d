// gRPC length-prefixed message framing (gRPC over HTTP/2 spec, "Length-Prefixed-Message"):
// 1 byte compressed flag + 4-byte big-endian length + message. Used by the nghttp2 bench
// client, which speaks gRPC without grpc++.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/message_lite.h>

namespace ic::tools {

// Appends one uncompressed frame holding `message` to *out.
void append_grpc_frame(const google::protobuf::MessageLite& message, std::string* out);

// Incremental decoder: DATA chunks in, whole messages out (boundaries are independent).
class GrpcFrameDecoder {
 public:
  // Bytes larger than this in one message make feed() fail (default 4 MiB, the server's limit).
  explicit GrpcFrameDecoder(std::uint32_t max_message_bytes = 4u << 20) : max_(max_message_bytes) {}

  // Appends a chunk. Returns false if a frame is compressed or longer than the limit.
  bool feed(std::string_view chunk);
  // Moves the next complete message payload into *message; false when none is complete.
  bool next(std::string* message);
  // Messages fully decoded so far.
  std::uint64_t messages() const { return messages_; }

 private:
  std::uint32_t max_;
  std::string buffer_;
  std::size_t offset_ = 0;
  std::uint64_t messages_ = 0;
  bool broken_ = false;
};

}  // namespace ic::tools
