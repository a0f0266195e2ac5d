#include "grpc/framing.hh"

namespace ic::grpc {

void append_frame_header(std::string& out, std::uint32_t length) {
  const char header[kFrameHeaderBytes] = {
      0, static_cast<char>(length >> 24), static_cast<char>(length >> 16),
      static_cast<char>(length >> 8), static_cast<char>(length)};
  out.append(header, kFrameHeaderBytes);
}

}  // namespace ic::grpc
