#include "common/grpc_frame.hh"

namespace ic::tools {

void append_grpc_frame(const google::protobuf::MessageLite& message, std::string* out) {
  const auto size = static_cast<std::uint32_t>(message.ByteSizeLong());
  out->push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((size >> shift) & 0xff));
  }
  message.AppendToString(out);
}

bool GrpcFrameDecoder::feed(std::string_view chunk) {
  if (broken_) return false;
  if (offset_ > 0 && offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  buffer_.append(chunk);
  // Validate every header now so a hostile length is rejected before it is buffered.
  std::size_t at = offset_;
  while (buffer_.size() - at >= 5) {
    const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + at);
    const std::uint32_t len = (std::uint32_t{p[1]} << 24) | (std::uint32_t{p[2]} << 16) |
                              (std::uint32_t{p[3]} << 8) | std::uint32_t{p[4]};
    if (p[0] != 0 || len > max_) {
      broken_ = true;
      return false;
    }
    if (buffer_.size() - at - 5 < len) break;
    at += 5 + len;
  }
  return true;
}

bool GrpcFrameDecoder::next(std::string* message) {
  if (broken_ || buffer_.size() - offset_ < 5) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  const std::uint32_t len = (std::uint32_t{p[1]} << 24) | (std::uint32_t{p[2]} << 16) |
                            (std::uint32_t{p[3]} << 8) | std::uint32_t{p[4]};
  if (buffer_.size() - offset_ - 5 < len) return false;
  message->assign(buffer_, offset_ + 5, len);
  offset_ += 5 + len;
  ++messages_;
  return true;
}

}  // namespace ic::tools
