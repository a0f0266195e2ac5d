#pragma once
// Listen addresses as operators write them (docs/admin.md flags):
// ":9090" (all interfaces), "127.0.0.1:9090", "[::1]:9090", "0.0.0.0:0"
// (port 0: the kernel picks one), "localhost:9090" (127.0.0.1).

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ic::net {

struct Address {
  sockaddr_storage storage{};  // sockaddr_in or sockaddr_in6, port in network order
  socklen_t length = 0;
  // Empty host: bind [::] dual-stack, falling back to 0.0.0.0 without IPv6.
  bool any_host = false;
};

// Parses "[host]:port". Host: empty, a dotted IPv4 literal, "localhost", or a
// bracketed IPv6 literal; port: decimal 0..65535. On error returns nullopt and
// sets `*error` to a short reason (e.g. `missing ":port"`).
std::optional<Address> parse_address(std::string_view text, std::string* error);

// "ip:port" / "[ip6]:port" for logs; "?" for an unknown family.
std::string format_address(const sockaddr* addr, socklen_t length);

// The bound port of a socket, host order; 0 on error.
std::uint16_t bound_port(int fd);

}  // namespace ic::net
