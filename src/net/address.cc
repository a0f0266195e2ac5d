#include "net/address.hh"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>
#include <string>

namespace ic::net {

namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// The socket address of the numeric `literal` of `family` (AF_INET or
// AF_INET6) and `port`; nullopt when inet_pton rejects the literal.
std::optional<Address> ip_address(int family, const std::string& literal, std::uint16_t port) {
  Address addr;
  auto* sin = reinterpret_cast<sockaddr_in*>(&addr.storage);
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
  const bool v6 = family == AF_INET6;
  void* ip = v6 ? static_cast<void*>(&sin6->sin6_addr) : static_cast<void*>(&sin->sin_addr);
  if (inet_pton(family, literal.c_str(), ip) != 1) return std::nullopt;
  addr.storage.ss_family = static_cast<sa_family_t>(family);
  (v6 ? sin6->sin6_port : sin->sin_port) = htons(port);
  addr.length = v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  return addr;
}

}  // namespace

std::optional<Address> parse_address(std::string_view text, std::string* error) {
  const auto fail = [&](const char* why) -> std::optional<Address> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("missing \":port\"");
  std::string_view host = text.substr(0, colon);
  const auto port = parse_port(text.substr(colon + 1));
  if (!port) return fail("port must be a number in [0, 65535]");

  if (host.empty()) {
    std::optional<Address> any = ip_address(AF_INET6, "::", *port);  // in6addr_any
    any->any_host = true;
    return any;
  }
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return fail("IPv6 host must look like [::1]");
    auto addr = ip_address(AF_INET6, std::string(host.substr(1, host.size() - 2)), *port);
    return addr ? addr : fail("not an IPv6 address");
  }
  if (host.find(':') != std::string_view::npos) {
    return fail("IPv6 host must be in brackets, e.g. [::1]:9090");
  }
  const std::string literal = host == "localhost" ? "127.0.0.1" : std::string(host);
  auto addr = ip_address(AF_INET, literal, *port);
  return addr ? addr : fail("host must be an IP address, \"localhost\" or empty");
}

std::string format_address(const sockaddr* addr, socklen_t length) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
    std::string out(ip);
    out.append(":").append(std::to_string(ntohs(sin->sin_port)));
    return out;
  }
  if (addr->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof ip);
    std::string out;
    out.reserve(sizeof ip + 8);
    out.append("[").append(ip).append("]:").append(std::to_string(ntohs(sin6->sin6_port)));
    return out;
  }
  return "?";
}

std::uint16_t bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace ic::net
