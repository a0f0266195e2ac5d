// Network layer microbenchmark (runtime engineer): one loopback TCP echo round
// trip through net::Server on a one-core Runtime — the fixed cost the reactor
// (recv from the provided-buffer pool, Session::on_data, end-of-turn flush,
// one send) adds to every request, and bulk echo throughput.
// Run: meson test -C <build> --benchmark --suite perf --verbose

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "net/server.hh"
#include "net/session.hh"
#include "runtime/runtime.hh"
#include "support/echo_session.hh"

namespace {

struct EchoServer {
  ic::runtime::Runtime runtime{ic::runtime::Runtime::Options{.cores = 1}};
  ic::net::Server server{runtime};
  EchoServer() {
    ic::net::ListenerOptions o;
    o.name = "echo";
    o.address = "127.0.0.1:0";
    o.factory = [](ic::net::Connection& c) { return std::make_unique<ic::test::EchoSession>(c); };
    (void)server.add_listener(std::move(o));
    runtime.start([this](unsigned core) { server.start_core(core); });
  }
  ~EchoServer() {
    runtime.stop();
    runtime.join();
  }
  int connect() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(server.port("echo"));
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
};

bool echo_once(int fd, std::string& buf) {
  std::size_t sent = 0;
  while (sent < buf.size()) {
    const ssize_t n = ::send(fd, buf.data() + sent, buf.size() - sent, 0);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::recv(fd, buf.data() + got, buf.size() - got, 0);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

// One request/response of `range(0)` bytes per iteration, strictly sequential.
void BM_EchoRoundTrip(benchmark::State& state) {
  EchoServer echo;
  const int fd = echo.connect();
  std::string buf(static_cast<std::size_t>(state.range(0)), 'x');
  for (auto _ : state) {
    if (!echo_once(fd, buf)) {
      state.SkipWithError("echo failed");
      break;
    }
  }
  ::close(fd);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_EchoRoundTrip)->Arg(64)->Arg(16 * 1024)->Arg(256 * 1024)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
