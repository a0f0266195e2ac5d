#include "common/probe.hh"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <cerrno>
#include <cstring>

namespace ic::tools {

namespace {

// Splits "host:port" / "[v6]:port"; false when there is no port.
bool split_host_port(const std::string& address, std::string* host, std::string* port) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (host->empty()) *host = "localhost";
  return true;
}

// "ip:port" of a resolved address, for messages.
std::string numeric(const addrinfo* ai) {
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  std::string text;
  if (ai->ai_family == AF_INET6) text += '[';
  text += host;
  if (ai->ai_family == AF_INET6) text += ']';
  text += ':';
  text += port;
  return text;
}

// One non-blocking connect with a deadline; 0 on success, else the errno (ETIMEDOUT on timeout).
int connect_within(const addrinfo* ai, int timeout_ms) {
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno;
  int err = 0;
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, timeout_ms);
      socklen_t len = sizeof err;
      if (ready <= 0) {
        err = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
      }
    }
  }
  ::close(fd);
  return err;
}

}  // namespace

std::string probe_tcp(const std::string& address, int timeout_ms) {
  std::string host, port;
  if (!split_host_port(address, &host, &port)) {
    return "\"" + address + "\" is not host:port";
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &list); rc != 0) {
    return "cannot resolve host \"" + host + "\": " + ::gai_strerror(rc);
  }
  std::string why;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    const int err = connect_within(ai, timeout_ms);
    if (err == 0) {
      why.clear();
      break;
    }
    if (!why.empty()) why += "; ";
    if (err == ECONNREFUSED) {
      why +=
          "connection refused by " + numeric(ai) + " (is the server running? is the port right?)";
    } else if (err == ETIMEDOUT) {
      why += numeric(ai) + ": no answer within " + std::to_string(timeout_ms) + " ms";
    } else {
      why += numeric(ai) + ": " + std::strerror(err);
    }
  }
  ::freeaddrinfo(list);
  return why;
}

}  // namespace ic::tools
