#include "support/grpc_frame.hh"

namespace ic::itest {

std::string frame_prefix(uint32_t length, uint8_t flags) {
  std::string p(5, '\0');
  p[0] = static_cast<char>(flags);
  p[1] = static_cast<char>((length >> 24) & 0xff);
  p[2] = static_cast<char>((length >> 16) & 0xff);
  p[3] = static_cast<char>((length >> 8) & 0xff);
  p[4] = static_cast<char>(length & 0xff);
  return p;
}

std::string frame(std::string_view payload, uint8_t flags) {
  std::string out = frame_prefix(static_cast<uint32_t>(payload.size()), flags);
  out.append(payload);
  return out;
}

std::vector<std::string> unframe(std::string_view body) {
  std::vector<std::string> parts;
  while (!body.empty()) {
    if (body.size() < 5) throw std::runtime_error("truncated gRPC message prefix");
    if (body[0] != '\0') throw std::runtime_error("compressed response message");
    uint32_t len = (static_cast<uint32_t>(static_cast<uint8_t>(body[1])) << 24) |
                   (static_cast<uint32_t>(static_cast<uint8_t>(body[2])) << 16) |
                   (static_cast<uint32_t>(static_cast<uint8_t>(body[3])) << 8) |
                   static_cast<uint32_t>(static_cast<uint8_t>(body[4]));
    if (body.size() - 5 < len) throw std::runtime_error("truncated gRPC message");
    parts.emplace_back(body.substr(5, len));
    body.remove_prefix(5 + len);
  }
  return parts;
}

std::string percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace ic::itest
