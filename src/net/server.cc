#include "net/server.hh"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "net/address.hh"
#include "net/core_net.hh"

namespace ic::net {

namespace {

constexpr int kListenBacklog = 4096;

struct SocketResult {
  int fd = -1;
  std::string error;
};

std::string errno_text(const char* what, const Address& addr) {
  return std::string(what) + " " +
         format_address(reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) + ": " +
         std::strerror(errno);
}

// The wildcard IPv4 address with `addr`'s port, for hosts without IPv6.
Address ipv4_any(const Address& addr) {
  Address v4;
  auto* sin = reinterpret_cast<sockaddr_in*>(&v4.storage);
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(INADDR_ANY);
  sin->sin_port = reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_port;
  v4.length = sizeof(sockaddr_in);
  v4.any_host = true;
  return v4;
}

SocketResult open_socket(const Address& addr, bool reuse_port) {
  const int family = addr.storage.ss_family;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {-1, errno_text("socket", addr)};
  const int one = 1;
  const int zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  // ":port" serves IPv4 clients too (mapped addresses) on a dual-stack host.
  if (family == AF_INET6 && addr.any_host) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0) {
    SocketResult r{-1, errno_text("bind", addr)};
    ::close(fd);
    return r;
  }
  return {fd, {}};
}

// SO_REUSEPORT would let a second server of the same user silently share our
// port; a plain bind first makes "address already in use" an error again.
std::string probe_free(const Address& addr) {
  SocketResult probe = open_socket(addr, false);
  if (probe.fd < 0) return probe.error;
  ::close(probe.fd);
  return {};
}

void set_port(Address& addr, std::uint16_t port) {
  if (addr.storage.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&addr.storage)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&addr.storage)->sin6_port = htons(port);
  }
}

}  // namespace

struct Server::Impl {
  explicit Impl(runtime::Runtime& rt) : runtime(rt) {
    for (unsigned core = 0; core < rt.cores(); ++core)
      cores.push_back(std::make_unique<CoreNet>(core));
  }
  ~Impl() {
    cores.clear();  // acceptors close their sockets
    for (auto& l : listeners)
      for (int fd : l->fds)
        if (fd >= 0) ::close(fd);
  }
  ListenerState* find(std::string_view name) const {
    for (const auto& l : listeners)
      if (l->options.name == name) return l.get();
    return nullptr;
  }
  std::string bind_all(ListenerState& state, Address addr);

  runtime::Runtime& runtime;
  std::vector<std::unique_ptr<ListenerState>> listeners;
  std::vector<std::unique_ptr<CoreNet>> cores;
};

std::string Server::Impl::bind_all(ListenerState& state, Address addr) {
  const auto close_all = [&state] {
    for (int& fd : state.fds) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  };
  for (unsigned core = 0; core < runtime.cores(); ++core) {
    if (core == 0) {
      std::string busy = probe_free(addr);
      if (!busy.empty() && addr.any_host && addr.storage.ss_family == AF_INET6 &&
          errno == EAFNOSUPPORT) {
        addr = ipv4_any(addr);
        busy = probe_free(addr);
      }
      if (!busy.empty()) return busy;
    }
    SocketResult s = open_socket(addr, true);
    if (s.fd < 0) {
      close_all();
      return s.error;
    }
    state.fds[core] = s.fd;
    if (::listen(s.fd, kListenBacklog) != 0) {
      std::string error = errno_text("listen", addr);
      close_all();
      return error;
    }
    // Port 0: every core must share the port the kernel gave the first one.
    if (core == 0) {
      state.port = bound_port(s.fd);
      set_port(addr, state.port);
    }
  }
  return {};
}

Server::Server(runtime::Runtime& runtime) : impl_(std::make_unique<Impl>(runtime)) {}

Server::~Server() = default;

std::string Server::add_listener(ListenerOptions options) {
  std::string error;
  const auto addr = parse_address(options.address, &error);
  if (!addr) return "\"" + options.address + "\": " + error;
  auto state = std::make_unique<ListenerState>();
  state->options = std::move(options);
  state->fds.assign(impl_->runtime.cores(), -1);
  error = impl_->bind_all(*state, *addr);
  if (!error.empty()) return error;
  state->bound_fds = state->fds;
  impl_->listeners.push_back(std::move(state));
  return {};
}

std::uint16_t Server::port(std::string_view name) const {
  const ListenerState* l = impl_->find(name);
  return l != nullptr ? l->port : 0;
}

const ListenerStats* Server::stats(std::string_view name) const {
  const ListenerState* l = impl_->find(name);
  return l != nullptr ? &l->stats : nullptr;
}

std::vector<std::string> Server::listener_names() const {
  std::vector<std::string> names;
  for (const auto& l : impl_->listeners) names.push_back(l->options.name);
  return names;
}

void Server::start_core(unsigned core) {
  std::vector<ListenerState*> listeners;
  for (auto& l : impl_->listeners) listeners.push_back(l.get());
  impl_->cores[core]->start(impl_->runtime.reactor(core), std::move(listeners));
}

void Server::shutdown(std::int64_t grace_us, std::function<void()> done) {
  shutdown(grace_us, std::move(done), listener_names());
}

void Server::shutdown(std::int64_t grace_us, std::function<void()> done,
                      std::vector<std::string> names) {
  auto chosen = std::make_shared<std::vector<const ListenerState*>>();
  for (const std::string& name : names)
    if (const ListenerState* l = impl_->find(name)) chosen->push_back(l);
  const auto which = [chosen](const ListenerState& l) {
    for (const ListenerState* c : *chosen)
      if (c == &l) return true;
    return false;
  };
  // Stop listening on every core's socket right now (shutdown(2) on a
  // listening socket takes it out of the SO_REUSEPORT group and refuses new
  // connections), so no client can connect after any core sent GOAWAY. Each
  // core then reaps its accept and closes the fd itself.
  for (const ListenerState* l : *chosen)
    for (int fd : l->bound_fds) ::shutdown(fd, SHUT_RDWR);
  const unsigned n = impl_->runtime.cores();
  auto remaining = std::make_shared<std::atomic<unsigned>>(n);
  auto shared_done = std::make_shared<std::function<void()>>(std::move(done));
  for (unsigned core = 0; core < n; ++core) {
    CoreNet* net = impl_->cores[core].get();
    // From a non-reactor thread this is the locked injection path and cannot fail.
    [[maybe_unused]] const bool queued =
        impl_->runtime.post(core, [net, grace_us, remaining, shared_done, which] {
          net->begin_shutdown(
              grace_us,
              [remaining, shared_done] {
                if (remaining->fetch_sub(1) == 1 && *shared_done) (*shared_done)();
              },
              which);
        });
  }
}

std::size_t Server::connections_on_this_core() const {
  return impl_->cores[runtime::current_core()]->connections();
}

}  // namespace ic::net
