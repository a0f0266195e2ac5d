#include "rpc/framing.hh"

#include <algorithm>
#include <cstring>

namespace ic::rpc {

bool MessageReader::accept_header() {
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

std::optional<std::span<const std::byte>> MessageReader::next(std::span<const std::byte>& data) {
  if (handed_body_) {  // the view handed out last ends here
    body_.clear();
    handed_body_ = false;
  }
  while (error_ == FrameError::kNone) {
    if (header_have_ < kFrameHeaderBytes) {
      if (data.empty()) return std::nullopt;
      // Fast path: a whole prefix (and maybe the message) in this span, nothing pending.
      if (header_have_ == 0 && data.size() >= kFrameHeaderBytes) {
        std::memcpy(header_, data.data(), kFrameHeaderBytes);
        if (!accept_header()) break;
        data = data.subspan(kFrameHeaderBytes);
        if (data.size() >= need_) {
          const std::span<const std::byte> message = data.first(need_);
          data = data.subspan(need_);
          return message;
        }
        header_have_ = kFrameHeaderBytes;
      } else {
        const std::size_t take = std::min(kFrameHeaderBytes - header_have_, data.size());
        std::memcpy(header_ + header_have_, data.data(), take);
        header_have_ += take;
        data = data.subspan(take);
        if (header_have_ < kFrameHeaderBytes || !accept_header()) break;
      }
      // Grow with the bytes that actually arrive: a peer announcing 4 MiB and
      // sending 5 bytes must not pin 4 MiB.
      body_.clear();
      body_.reserve(std::min<std::size_t>(need_, kInitialBodyReserve));
    }
    const std::size_t take = std::min(need_ - body_.size(), data.size());
    body_.append(reinterpret_cast<const char*>(data.data()), take);
    data = data.subspan(take);
    if (body_.size() < need_) break;
    header_have_ = 0;
    handed_body_ = true;
    return std::as_bytes(std::span(body_.data(), body_.size()));
  }
  return std::nullopt;
}

}  // namespace ic::rpc
