#include "common/grpc_frame.hh"

#include <span>

namespace ic::tools {

void append_grpc_frame(const google::protobuf::MessageLite& message, std::string* out) {
  rpc::append_frame_header(*out, static_cast<std::uint32_t>(message.ByteSizeLong()));
  message.AppendToString(out);
}

bool GrpcFrameDecoder::feed(std::string_view chunk) {
  const rpc::FrameError error = reader_.feed(
      std::as_bytes(std::span(chunk.data(), chunk.size())),
      [this](std::span<const std::byte> message) {
        complete_.emplace_back(reinterpret_cast<const char*>(message.data()), message.size());
      });
  return error == rpc::FrameError::kNone;
}

bool GrpcFrameDecoder::next(std::string* message) {
  if (reader_.error() != rpc::FrameError::kNone || complete_.empty()) return false;
  *message = std::move(complete_.front());
  complete_.pop_front();
  ++messages_;
  return true;
}

}  // namespace ic::tools
