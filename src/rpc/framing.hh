#pragma once
// gRPC Length-Prefixed-Message framing (grpc/doc/PROTOCOL-HTTP2.md):
// 1 byte Compressed-Flag, 4 bytes big-endian Message-Length, then the message.
// Message boundaries are independent of HTTP/2 DATA frame boundaries, so the
// reader is an incremental stream parser (docs/architecture.md rule 7).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// Incremental parser for the request side of one call. Feed it DATA payload
// bytes in order; it hands out each complete message. A message that arrives
// whole inside one fed span is handed out as a view into that span (no copy);
// one split across spans is gathered in an owned buffer that is sized only
// after its length passed the limit check.
class MessageReader {
 public:
  // `max_message_bytes`: largest accepted Message-Length (default 4 MiB per
  // docs/contract.md).
  explicit MessageReader(std::size_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  // Parses `data`, calling `on_message(std::span<const std::byte>)` for each
  // complete message (the view is valid only during that call). Stops at the
  // first error and returns it; after an error the reader ignores further
  // input and keeps returning that error.
  template <typename OnMessage>
  FrameError feed(std::span<const std::byte> data, OnMessage&& on_message);

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
};

// Appends the 5-byte prefix for an uncompressed message of `length` bytes.
inline void append_frame_header(std::string& out, std::uint32_t length) {
  const char header[kFrameHeaderBytes] = {
      0, static_cast<char>(length >> 24), static_cast<char>(length >> 16),
      static_cast<char>(length >> 8), static_cast<char>(length)};
  out.append(header, kFrameHeaderBytes);
}

// ---- implementation ----

inline bool MessageReader::accept_header() {
  const auto flag = static_cast<std::uint8_t>(header_[0]);
  if (flag == 1) {
    error_ = FrameError::kCompressed;
    return false;
  }
  if (flag != 0) {
    error_ = FrameError::kBadFlag;
    return false;
  }
  need_ = (static_cast<std::size_t>(header_[1]) << 24) |
          (static_cast<std::size_t>(header_[2]) << 16) |
          (static_cast<std::size_t>(header_[3]) << 8) | static_cast<std::size_t>(header_[4]);
  if (need_ > max_message_bytes_) {
    error_ = FrameError::kTooLarge;
    return false;
  }
  return true;
}

template <typename OnMessage>
FrameError MessageReader::feed(std::span<const std::byte> data, OnMessage&& on_message) {
  std::size_t pos = 0;
  while (error_ == FrameError::kNone) {
    if (header_have_ < kFrameHeaderBytes) {
      if (pos == data.size()) break;
      // Fast path: a whole prefix (and maybe the message) in this span, nothing pending.
      if (header_have_ == 0 && data.size() - pos >= kFrameHeaderBytes) {
        std::memcpy(header_, data.data() + pos, kFrameHeaderBytes);
        if (!accept_header()) break;
        pos += kFrameHeaderBytes;
        if (data.size() - pos >= need_) {
          on_message(data.subspan(pos, need_));
          pos += need_;
          continue;
        }
        header_have_ = kFrameHeaderBytes;
      } else {
        const std::size_t take = std::min(kFrameHeaderBytes - header_have_, data.size() - pos);
        std::memcpy(header_ + header_have_, data.data() + pos, take);
        header_have_ += take;
        pos += take;
        if (header_have_ < kFrameHeaderBytes) break;
        if (!accept_header()) break;
      }
      // Grow with the bytes that actually arrive: a peer announcing 4 MiB and
      // sending 5 bytes must not pin 4 MiB.
      body_.clear();
      body_.reserve(std::min<std::size_t>(need_, kInitialBodyReserve));
    }
    const std::size_t take = std::min(need_ - body_.size(), data.size() - pos);
    body_.append(reinterpret_cast<const char*>(data.data() + pos), take);
    pos += take;
    if (body_.size() < need_) break;
    header_have_ = 0;
    on_message(std::as_bytes(std::span(body_.data(), body_.size())));
    body_.clear();
  }
  return error_;
}

}  // namespace ic::rpc
