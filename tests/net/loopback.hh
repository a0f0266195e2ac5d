#pragma once
// Test-only helpers: blocking loopback client sockets, and a running
// Runtime + net::Server pair with one listener whose sessions the test builds.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <future>
#include <memory>
#include <string>

#include "net/server.hh"
#include "runtime/runtime.hh"
#include "support/loopback_socket.hh"
#include "support/reactor_backend.hh"

namespace test {

// Connects to 127.0.0.1:`port`; reads time out after 10 s so a broken server
// fails the test instead of hanging it.
// Connects to 127.0.0.1:port. A non-zero `rcvbuf_bytes` fixes the receive
// buffer before connecting (no autotuning), so a test can rely on the kernel
// not absorbing a large reply: hosts with tcp_rmem max of 32 MiB otherwise
// swallow a 16 MiB reply whole.
inline int connect_to(std::uint16_t port, int rcvbuf_bytes = 0) {
  const int fd = ic::test::connect_loopback(port, rcvbuf_bytes);
  if (fd < 0) return -1;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

inline bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads exactly `n` bytes (fewer on EOF, error or timeout).
inline std::string read_exact(int fd, std::size_t n) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, out.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

// Reads until EOF; returns {bytes, true} on EOF, {bytes, false} on timeout/error.
inline std::pair<std::string, bool> read_to_eof(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r == 0) return {out, true};
    if (r < 0) return {out, errno == ECONNRESET};
    out.append(buf, static_cast<std::size_t>(r));
  }
}

// True when the peer has nothing for us within `ms` (used to show that the
// server did NOT answer while paused).
inline bool quiet_for(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 0;
}

inline std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return s;
}

// A Runtime with `cores` reactors and a Server with one listener on
// 127.0.0.1:0, started; stop() joins (also run by the destructor).
class Loopback {
 public:
  Loopback(unsigned cores, ic::net::ListenerOptions options)
      : runtime_(make_options(cores)), server_(runtime_) {
    options.name = "test";
    options.address = "127.0.0.1:0";
    error_ = server_.add_listener(std::move(options));
    if (error_.empty()) {
      runtime_.start([this](unsigned core) { server_.start_core(core); });
    }
  }
  ~Loopback() { stop(); }

  const std::string& error() const { return error_; }
  std::uint16_t port() const { return server_.port("test"); }
  const ic::net::ListenerStats& stats() const { return *server_.stats("test"); }
  ic::runtime::Runtime& runtime() { return runtime_; }
  ic::net::Server& server() { return server_; }

  // Runs `fn` on `core` and waits for it (bounded).
  template <typename F>
  void on_core(unsigned core, F fn) {
    std::promise<void> done;
    auto f = done.get_future();
    (void)runtime_.post(core, [&] {
      fn();
      done.set_value();
    });
    f.wait_for(std::chrono::seconds(10));
  }

  void stop() {
    runtime_.stop();
    runtime_.join();
  }

 private:
  static ic::runtime::Runtime::Options make_options(unsigned cores) {
    ic::runtime::Runtime::Options o;
    o.cores = cores;
    o.pin_threads = false;
    o.backend = ic::testing::reactor_backend();
    return o;
  }
  ic::runtime::Runtime runtime_;
  ic::net::Server server_;
  std::string error_;
};

// Waits up to 60 s for `pred` (a bound for a hung test, not a timing claim:
// under ThreadSanitizer on a loaded 2-core machine, eight 16 MiB replies
// took just over 10 s).
template <typename P>
bool eventually(P pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

}  // namespace test
