#pragma once
// A minimal blocking HTTP/1.1 client over a loopback TCP socket for the admin
// integration tests: raw bytes in, raw bytes out, so malformed requests and
// slow senders can be written exactly.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "support/loopback_socket.hh"

namespace ic::itest {

// A connected socket to 127.0.0.1:`port`; closes on destruction (not copyable).
class RawConnection {
 public:
  // Throws std::runtime_error when the connection fails.
  explicit RawConnection(std::uint16_t port);

  // Writes all of `bytes` (throws on error).
  void send(std::string_view bytes);
  // Reads until the peer closes or `timeout_ms` passes; returns what arrived.
  std::string read_until_close(int timeout_ms);
  // True when the peer has closed (a read returns 0) within `timeout_ms`.
  bool closed_within(int timeout_ms);

 private:
  test::OwnedFd fd_;
};

struct HttpReply {
  int status = 0;
  std::string headers;  // the raw header block (status line excluded)
  std::string body;
};

// Splits a complete response ("HTTP/1.1 200 OK\r\n...\r\n\r\nbody").
std::optional<HttpReply> parse_reply(const std::string& raw);

// One request with "Connection: close" on a fresh connection.
HttpReply http_request(std::uint16_t port, std::string_view method, std::string_view path,
                       std::string_view body = {}, std::string_view extra_headers = {});

}  // namespace ic::itest
