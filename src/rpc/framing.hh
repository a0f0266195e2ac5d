#pragma once
// gRPC Length-Prefixed-Message framing (grpc/doc/PROTOCOL-HTTP2.md):
// 1 byte Compressed-Flag, 4 bytes big-endian Message-Length, then the message.
// Message boundaries are independent of HTTP/2 DATA frame boundaries, so the
// reader is an incremental stream parser (docs/architecture.md rule 7).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ic::rpc {

// Size of the length prefix in bytes.
inline constexpr std::size_t kFrameHeaderBytes = 5;
// First reservation for a split message's buffer (bytes); it grows as data arrives.
inline constexpr std::size_t kInitialBodyReserve = 64 * 1024;

// Why a MessageReader stopped; maps to a gRPC status by the caller.
enum class FrameError : std::uint8_t {
  kNone = 0,
  kTooLarge,    // Message-Length over the limit → RESOURCE_EXHAUSTED (docs/contract.md)
  kCompressed,  // Compressed-Flag = 1; we only speak identity → UNIMPLEMENTED
  kBadFlag,     // Compressed-Flag not 0 or 1 → INTERNAL
};

// Incremental parser for the request side of one call. Give it DATA payload
// bytes in order; it hands out each complete message. A message that arrives
// whole inside one given span is handed out as a view into that span (no
// copy); one split across spans is gathered in an owned buffer that is sized
// only after its length passed the limit check.
// The server reads every request stream through it (rpc/server_calls.cc),
// the tools' clients every response (tools/common/grpc_frame.hh).
class MessageReader {
 public:
  // `max_message_bytes`: largest accepted Message-Length (default 4 MiB per
  // docs/contract.md).
  explicit MessageReader(std::size_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  // The next complete message out of `data`, which is advanced past the bytes
  // taken; std::nullopt once `data` holds no further complete message (its
  // bytes are kept for the next call) or on an error (see error()). The view
  // is valid until the next call. After an error the reader ignores further
  // input.
  std::optional<std::span<const std::byte>> next(std::span<const std::byte>& data);

  // Parses `data`, calling `on_message(std::span<const std::byte>)` for each
  // complete message (the view is valid only during that call). Stops at the
  // first error and returns it; after an error the reader ignores further
  // input and keeps returning that error.
  template <typename OnMessage>
  FrameError feed(std::span<const std::byte> data, OnMessage&& on_message) {
    while (const auto message = next(data)) on_message(*message);
    return error_;
  }

  // True when some bytes of a message (or its prefix) were received but not
  // the whole message: a half-close now means a truncated message.
  bool mid_message() const { return header_have_ > 0; }
  // The sticky error, kNone while healthy.
  FrameError error() const { return error_; }
  // Bytes of a split message gathered so far (held until it completes).
  std::size_t buffered_bytes() const { return body_.size(); }
  // Bytes reserved for gathering a split message (the empty std::string
  // capacity until a split message is accepted).
  std::size_t buffer_capacity() const { return body_.capacity(); }

 private:
  // Validates the 5-byte prefix in header_; sets need_ and error_.
  bool accept_header();

  std::size_t max_message_bytes_;
  FrameError error_ = FrameError::kNone;
  std::byte header_[kFrameHeaderBytes] = {};
  std::size_t header_have_ = 0;  // 0..5 prefix bytes collected
  std::size_t need_ = 0;         // message length once the prefix is complete
  std::string body_;             // gathered message bytes (split case only)
  bool handed_body_ = false;     // body_ is the message last handed out
};

// Appends the 5-byte prefix for an uncompressed message of `length` bytes to
// a std::string or an h2::ResponseBytes.
template <class Bytes>
void append_frame_header(Bytes& out, std::uint32_t length) {
  const char header[kFrameHeaderBytes] = {
      0, static_cast<char>(length >> 24), static_cast<char>(length >> 16),
      static_cast<char>(length >> 8), static_cast<char>(length)};
  out.append(header, kFrameHeaderBytes);
}

}  // namespace ic::rpc
