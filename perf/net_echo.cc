// Network layer microbenchmark (runtime engineer): one loopback TCP echo round
// trip through net::Server on a one-core Runtime — the fixed cost the reactor
// (recv from the provided-buffer pool, Session::on_data, end-of-turn flush,
// one send) adds to every request, and bulk echo throughput.
//
// BM_PacedEcho is the floor of one wake (issue 13): echo round trips sent
// open loop at a fixed rate, as inferencecache-bench sends LookupRoute at
// moderate load, against three one-thread servers — a bare epoll loop, a bare
// io_uring loop set up as our reactor's ring (DEFER_TASKRUN, the reply sent
// inline with send(2)) and net::Server itself — reporting the server's CPU
// per round trip and the latency percentiles. What the bare servers spend is
// the kernel's and the machine's (waking a sleeping thread, loopback TCP,
// waking the client), not ours.
// Run: meson test -C <build> --benchmark --suite perf --verbose
//  or: perf/net_echo --benchmark_filter=Paced (as root: chrt -f 10 for both threads)

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
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

// ---- Paced round trips (BM_PacedEcho) ------------------------------------------

constexpr std::size_t kPacedBytes = 256;  // about a LookupRoute request or answer on the wire
constexpr int kPacedConnections = 4;      // as perf/compare.sh's load
constexpr double kPacedSeconds = 2.0;

std::int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Pins the calling thread to `cpu` when the machine has it (server on CPU 0,
// client on CPU 1, as perf/compare.sh places them; threads it starts inherit it).
void pin_to(int cpu) {
  if (static_cast<int>(std::thread::hardware_concurrency()) <= cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int listen_loopback(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin);
  ::listen(fd, kPacedConnections);
  socklen_t len = sizeof sin;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len);
  port = ntohs(sin.sin_port);
  return fd;
}

int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// A one-thread echo server of the bare kind: accepts kPacedConnections
// connections, then echoes until `stop_fd` (an eventfd) is written.
class BareServer {
 public:
  explicit BareServer(bool uring) {
    listen_fd_ = listen_loopback(port_);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    thread_ = std::thread([this, uring] {
      std::array<int, kPacedConnections> fds{};
      for (int& fd : fds) {
        fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      if (uring) {
        uring_loop(fds);
      } else {
        epoll_loop(fds);
      }
      for (const int fd : fds) ::close(fd);
    });
  }
  ~BareServer() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
    thread_.join();
    ::close(stop_fd_);
    ::close(listen_fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  // Level-triggered epoll: wait, recv what arrived, send it back.
  void epoll_loop(const std::array<int, kPacedConnections>& fds) const {
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = stop_fd_;
    epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd_, &ev);
    for (const int fd : fds) {
      ev.data.fd = fd;
      epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    std::array<char, 16 * 1024> buf{};
    epoll_event ready[kPacedConnections + 1];
    for (bool stop = false; !stop;) {
      const int n = epoll_wait(ep, ready, kPacedConnections + 1, -1);
      for (int i = 0; i < n; ++i) {
        if (ready[i].data.fd == stop_fd_) stop = true;
        if (stop) break;
        const ssize_t got = ::recv(ready[i].data.fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (got > 0) ::send(ready[i].data.fd, buf.data(), static_cast<std::size_t>(got), 0);
      }
    }
    ::close(ep);
  }

  // The ring as our reactor sets it up (runtime/reactor.cc), one recv per
  // connection re-armed after each completion, the echo sent inline, and one
  // io_uring_enter per wake that submits the re-arms and waits.
  void uring_loop(const std::array<int, kPacedConnections>& fds) const {
    io_uring ring{};
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(64, &ring, &params) < 0) {
      params = {};
      io_uring_queue_init_params(64, &ring, &params);
    }
    std::array<std::array<char, 16 * 1024>, kPacedConnections> bufs{};
    const auto arm = [&](std::size_t i) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_recv(sqe, fds[i], bufs[i].data(), bufs[i].size(), 0);
      io_uring_sqe_set_data64(sqe, i);
    };
    for (std::size_t i = 0; i < fds.size(); ++i) arm(i);
    std::uint64_t stop_value = 0;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, stop_fd_, &stop_value, sizeof stop_value, 0);
    io_uring_sqe_set_data64(sqe, kPacedConnections);
    for (bool stop = false; !stop;) {
      io_uring_submit_and_wait(&ring, 1);
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring, head, cqe) {
        ++seen;
        const std::uint64_t i = cqe->user_data;
        if (i == kPacedConnections || cqe->res <= 0) {
          stop = true;
          continue;
        }
        ::send(fds[i], bufs[i].data(), static_cast<std::size_t>(cqe->res), MSG_DONTWAIT);
        arm(i);
      }
      io_uring_cq_advance(&ring, seen);
    }
    io_uring_queue_exit(&ring);
  }

  int listen_fd_ = -1;
  int stop_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

struct PacedResult {
  std::int64_t calls = 0;
  std::int64_t client_cpu_ns = 0;
  std::vector<std::int64_t> latency_ns;  // from each call's intended send time
};

// The client: one call every 1/rate s on the next idle connection (open
// loop: a call whose time came while all were busy goes out late and counts
// from its intended time), the thread asleep in epoll_wait between events.
PacedResult run_paced(std::uint16_t port, double rate, int cpu) {
  pin_to(cpu);
  std::array<int, kPacedConnections> fds{};
  for (int& fd : fds) fd = connect_loopback(port);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  const int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kPacedConnections;
  epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev);
  for (std::size_t i = 0; i < fds.size(); ++i) {
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
  }
  const std::string out(kPacedBytes, 'x');
  std::array<char, kPacedBytes> in{};
  std::array<std::int64_t, kPacedConnections> started{};  // intended time, -1 idle
  std::array<std::size_t, kPacedConnections> got{};
  started.fill(-1);
  const auto period = static_cast<std::int64_t>(1e9 / rate);
  const std::int64_t total = static_cast<std::int64_t>(rate * kPacedSeconds);
  PacedResult r;
  r.latency_ns.reserve(static_cast<std::size_t>(total));
  const std::int64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const std::int64_t start = clock_ns(CLOCK_MONOTONIC) + 1'000'000;
  std::int64_t sent = 0;
  epoll_event ready[kPacedConnections + 1];
  while (r.calls < total) {
    const std::int64_t now = clock_ns(CLOCK_MONOTONIC);
    for (std::size_t i = 0; i < fds.size() && sent < total && start + sent * period <= now; ++i) {
      if (started[i] >= 0) continue;
      started[i] = start + sent++ * period;
      got[i] = 0;
      ::send(fds[i], out.data(), out.size(), 0);
    }
    // Sleep until the next call is due, or, with every connection busy (that
    // call is late already), until an answer comes: never spin.
    const bool idle = std::find(started.begin(), started.end(), -1) != started.end();
    itimerspec at{};
    const std::int64_t next = start + sent * period;
    if (sent < total && idle) {
      at.it_value = {static_cast<time_t>(next / 1'000'000'000),
                     static_cast<long>(next % 1'000'000'000)};
    }
    timerfd_settime(timer, TFD_TIMER_ABSTIME, &at, nullptr);
    const int n = epoll_wait(ep, ready, kPacedConnections + 1, -1);
    for (int k = 0; k < n; ++k) {
      const std::uint64_t i = ready[k].data.u64;
      if (i == kPacedConnections) {
        std::uint64_t expirations = 0;
        [[maybe_unused]] const ssize_t m = ::read(timer, &expirations, sizeof expirations);
        continue;
      }
      const ssize_t m = ::recv(fds[i], in.data(), kPacedBytes - got[i], MSG_DONTWAIT);
      if (m > 0) got[i] += static_cast<std::size_t>(m);
      if (got[i] < kPacedBytes) continue;
      r.latency_ns.push_back(clock_ns(CLOCK_MONOTONIC) - started[i]);
      started[i] = -1;
      ++r.calls;
    }
  }
  r.client_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  for (const int fd : fds) ::close(fd);
  ::close(timer);
  ::close(ep);
  return r;
}

double percentile_us(std::vector<std::int64_t>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return static_cast<double>(v[k]) / 1000.0;
}

// range(0): 0 bare epoll, 1 bare io_uring, 2 net::Server; range(1): calls/s;
// range(2): the client's CPU (1: apart from the server's, as perf/compare.sh
// runs; 0: on the server's, where a wake-up needs no other CPU).
// Counters: the server's CPU per round trip (the process's CPU less the
// client thread's), the client's, and latency percentiles, all in µs.
void BM_PacedEcho(benchmark::State& state) {
  const double rate = static_cast<double>(state.range(1));
  for (auto _ : state) {
    pin_to(0);  // the server thread starts from here
    std::unique_ptr<BareServer> bare;
    std::unique_ptr<EchoServer> reactor;
    std::uint16_t port = 0;
    if (state.range(0) < 2) {
      bare = std::make_unique<BareServer>(state.range(0) == 1);
      port = bare->port();
    } else {
      reactor = std::make_unique<EchoServer>();
      port = reactor->server.port("echo");
    }
    const std::int64_t process0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    PacedResult r = run_paced(port, rate, static_cast<int>(state.range(2)));
    const std::int64_t process = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - process0;
    const auto calls = static_cast<double>(std::max<std::int64_t>(r.calls, 1));
    state.counters["server_cpu_us"] =
        static_cast<double>(process - r.client_cpu_ns) / 1000.0 / calls;
    state.counters["client_cpu_us"] = static_cast<double>(r.client_cpu_ns) / 1000.0 / calls;
    state.counters["p50_us"] = percentile_us(r.latency_ns, 0.50);
    state.counters["p99_us"] = percentile_us(r.latency_ns, 0.99);
    state.counters["p999_us"] = percentile_us(r.latency_ns, 0.999);
  }
  const char* kinds[] = {"bare epoll", "bare io_uring", "net::Server"};
  state.SetLabel(std::string(kinds[state.range(0)]) +
                 (state.range(2) == 0 ? ", client on the server's CPU" : ""));
}
BENCHMARK(BM_PacedEcho)
    ->ArgsProduct({{0, 1, 2}, {4000, 13000}, {1, 0}})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
