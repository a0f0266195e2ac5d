#include "http_client.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace ic::itest {

RawConnection::RawConnection(std::uint16_t port) : fd_(ic::test::connect_loopback(port)) {
  if (fd_.get() < 0) {
    throw std::runtime_error(std::string("connect failed: ") + std::strerror(errno));
  }
}

void RawConnection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("send failed: ") + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string RawConnection::read_until_close(int timeout_ms) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[16384];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return out;
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

bool RawConnection::closed_within(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
  return false;
}

std::optional<HttpReply> parse_reply(const std::string& raw) {
  const std::size_t line_end = raw.find("\r\n");
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (line_end == std::string::npos || head_end == std::string::npos) return std::nullopt;
  if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || raw.size() < 12) return std::nullopt;
  HttpReply reply;
  reply.status = std::stoi(raw.substr(9, 3));
  reply.headers = raw.substr(line_end + 2, head_end - line_end - 2 + 2);
  reply.body = raw.substr(head_end + 4);
  return reply;
}

HttpReply http_request(std::uint16_t port, std::string_view method, std::string_view path,
                       std::string_view body, std::string_view extra_headers) {
  std::string request;
  request.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  request.append(extra_headers);
  if (!body.empty() || method == "POST" || method == "PUT") {
    request.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  request.append("Connection: close\r\n\r\n").append(body);
  RawConnection conn(port);
  conn.send(request);
  const std::string raw = conn.read_until_close(20000);
  auto reply = parse_reply(raw);
  if (!reply) throw std::runtime_error("no HTTP response: " + raw);
  return *reply;
}

}  // namespace ic::itest
