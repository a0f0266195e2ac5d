// net::Server + TcpConnection through real loopback sockets, with test-only
// Sessions (echo and friends).

#include "net/server.hh"

#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "loopback.hh"
#include "net/session.hh"

using test::connect_to;
using test::eventually;
using test::Loopback;
using test::read_exact;
using test::read_to_eof;
using test::write_all;

namespace {

// What the sessions of one test saw, and how they should behave.
struct Probe {
  std::atomic<int> created{0};
  std::atomic<int> closed{0};
  std::atomic<int> destroyed{0};
  std::atomic<int> shutdowns{0};
  std::atomic<std::size_t> received{0};
  // Knobs, set before the first connection.
  std::size_t bulk_reply = 0;     // on the first bytes: also send this many bytes
  bool pause_on_p = false;        // 'p' pauses reading (test resumes)
  bool busy_until_x = false;      // idle() false until an 'x' arrived
  bool abort_on_k = false;        // 'k' closes with abort
  bool reply_cross_core = false;  // echo via a round trip to the other core
  std::atomic<ic::net::Connection*> paused{nullptr};
};

class EchoSession final : public ic::net::Session {
 public:
  EchoSession(ic::net::Connection& conn, Probe& probe) : conn_(conn), probe_(probe) {
    probe_.created.fetch_add(1);
  }
  ~EchoSession() override { probe_.destroyed.fetch_add(1); }

  bool on_data(std::span<const std::byte> data) override {
    probe_.received.fetch_add(data.size());
    const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
    if (probe_.reply_cross_core) {
      reply_via_other_core(std::string(text));
      return true;
    }
    pending_.append(text);
    if (!bulk_sent_ && probe_.bulk_reply > 0) {
      bulk_sent_ = true;
      pending_ += test::pattern(probe_.bulk_reply);
    }
    if (probe_.pause_on_p && text.find('p') != std::string_view::npos) {
      conn_.pause_reading();
      probe_.paused.store(&conn_);
    }
    if (text.find('x') != std::string_view::npos) saw_x_ = true;
    if (probe_.abort_on_k && text.find('k') != std::string_view::npos) conn_.close(true);
    return true;
  }
  void flush() override {
    if (pending_.empty()) return;
    conn_.send(std::as_bytes(std::span(pending_.data(), pending_.size())));
    pending_.clear();
  }
  void on_shutdown() override { probe_.shutdowns.fetch_add(1); }
  bool idle() const override { return !probe_.busy_until_x || saw_x_; }
  void on_close() override { probe_.closed.fetch_add(1); }

 private:
  void reply_via_other_core(std::string text) {
    auto& rt = ic::runtime::current_reactor().runtime();
    const unsigned home = conn_.core();
    const unsigned other = (home + 1) % rt.cores();
    auto* self = this;
    const bool ok = rt.post(other, [&rt, home, self, text = std::move(text)]() mutable {
      const bool back = rt.post(home, [self, text = "R:" + text] {
        self->pending_ += text;
        self->conn_.request_flush();
      });
      (void)back;
    });
    (void)ok;
  }

  ic::net::Connection& conn_;
  Probe& probe_;
  std::string pending_;
  bool bulk_sent_ = false;
  bool saw_x_ = false;
};

ic::net::ListenerOptions echo_listener(Probe& probe) {
  ic::net::ListenerOptions o;
  o.factory = [&probe](ic::net::Connection& c) -> std::unique_ptr<ic::net::Session> {
    return std::make_unique<EchoSession>(c, probe);
  };
  return o;
}

// A server of `cores` reactors and one connection with an echo "call" in
// flight: its session stays busy until it reads an 'x'. `idle_timeout_us` 0
// keeps the listener's default.
struct CallInFlight {
  explicit CallInFlight(unsigned cores, std::int64_t idle_timeout_us = 0)
      : lb(cores, busy_listener(probe, idle_timeout_us)), fd(connect_to(lb.port())) {
    REQUIRE(write_all(fd, "a"));
    CHECK(read_exact(fd, 1) == "a");
  }
  ~CallInFlight() { ::close(fd); }
  static ic::net::ListenerOptions busy_listener(Probe& probe, std::int64_t idle_timeout_us) {
    probe.busy_until_x = true;  // before the server starts: no race with its threads
    ic::net::ListenerOptions o = echo_listener(probe);
    if (idle_timeout_us > 0) o.idle_timeout_us = idle_timeout_us;
    return o;
  }

  Probe probe;
  Loopback lb;
  int fd;
};

}  // namespace

TEST_SUITE("net") {
  TEST_CASE("echo over many connections, counted and closed cleanly") {
    Probe probe;
    Loopback lb(2, echo_listener(probe));
    REQUIRE(lb.error().empty());
    REQUIRE(lb.port() != 0);
    constexpr int kConns = 64;
    std::vector<int> fds;
    for (int i = 0; i < kConns; ++i) {
      const int fd = connect_to(lb.port());
      REQUIRE(fd >= 0);
      fds.push_back(fd);
    }
    int mismatches = 0;
    for (int i = 0; i < kConns; ++i) {
      const std::string msg = "hello-" + std::to_string(i);
      REQUIRE(write_all(fds[i], msg));
      if (read_exact(fds[i], msg.size()) != msg) ++mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(lb.stats().accepted_total.load() == kConns);
    CHECK(lb.stats().open.load() == kConns);
    for (int fd : fds) ::close(fd);
    CHECK(eventually([&] { return probe.closed.load() == kConns; }));
    CHECK(eventually([&] { return lb.stats().open.load() == 0; }));
    CHECK(probe.created.load() == kConns);
    CHECK(probe.destroyed.load() == kConns);
  }

  TEST_CASE("bytes over one receive, then the peer's FIN: all echoed, then closed") {
    // The FIN is already known when the last, short receive reads the bytes
    // before it (on epoll: reported with them, and no new edge comes).
    Probe probe;
    Loopback lb(1, echo_listener(probe));
    const int fd = connect_to(lb.port());
    REQUIRE(fd >= 0);
    REQUIRE(eventually([&] { return lb.stats().open.load() == 1; }));  // accepted, reading
    // The core is held while the bytes and the FIN arrive, so its next wait
    // sees both at once (a test may block its reactor; the server never does).
    std::latch held(1);
    REQUIRE(lb.runtime().post(0, [&] { held.wait(); }));
    const std::string upload = test::pattern(40'000);  // 16 KiB + 16 KiB + a short read
    REQUIRE(write_all(fd, upload));
    REQUIRE(::shutdown(fd, SHUT_WR) == 0);
    held.count_down();
    const auto [bytes, eof] = read_to_eof(fd);
    CHECK(bytes == upload);
    CHECK(eof);
    CHECK(eventually([&] { return probe.closed.load() == 1; }));
    ::close(fd);
  }

  TEST_CASE("a large reply to a slow reader arrives whole (short writes)") {
    Probe probe;
    probe.bulk_reply = 8u << 20;
    Loopback lb(1, echo_listener(probe));
    const int fd = connect_to(lb.port());
    REQUIRE(fd >= 0);
    REQUIRE(write_all(fd, "go"));
    // Let the server fill the socket buffers so its send completes short.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string got = read_exact(fd, 2 + probe.bulk_reply);
    CHECK(got.size() == 2 + probe.bulk_reply);
    CHECK(got == "go" + test::pattern(probe.bulk_reply));
    ::close(fd);
  }

  TEST_CASE("echo of a big upload under backpressure keeps every byte in order") {
    Probe probe;
    auto opts = echo_listener(probe);
    opts.output_high_water = 64 * 1024;  // pause reading early and often
    Loopback lb(1, std::move(opts));
    const int fd = connect_to(lb.port());
    REQUIRE(fd >= 0);
    const std::string upload = test::pattern(6u << 20);
    std::thread writer([&] { write_all(fd, upload); });
    const std::string got = read_exact(fd, upload.size());
    writer.join();
    CHECK(got.size() == upload.size());
    CHECK(got == upload);
    ::close(fd);
  }

  TEST_CASE("pause_reading holds input until resume_reading") {
    Probe probe;
    probe.pause_on_p = true;
    Loopback lb(1, echo_listener(probe));
    const int fd = connect_to(lb.port());
    REQUIRE(fd >= 0);
    REQUIRE(write_all(fd, "p"));
    CHECK(read_exact(fd, 1) == "p");
    REQUIRE(eventually([&] { return probe.paused.load() != nullptr; }));
    REQUIRE(write_all(fd, "later"));
    CHECK(test::quiet_for(fd, 150));  // nothing echoed: not read while paused
    CHECK(probe.received.load() == 1);
    lb.on_core(0, [&] { probe.paused.load()->resume_reading(); });
    CHECK(read_exact(fd, 5) == "later");
    CHECK(probe.received.load() == 6);
    ::close(fd);
  }

  TEST_CASE("abort while a send is in flight frees everything once") {
    Probe probe;
    probe.bulk_reply = 16u << 20;
    probe.abort_on_k = true;
    auto opts = echo_listener(probe);
    // Above the reply size, so reading never pauses: the "k" is read (and the
    // abort happens) while most of the reply is still queued. With a lower mark
    // the "k" waits until the queue drains below half, and kernel buffers may
    // by then hold all that is left.
    opts.output_high_water = 64u << 20;
    Loopback lb(1, std::move(opts));
    const int fd = connect_to(lb.port(), 64 * 1024);  // the reply cannot fit in kernel buffers
    REQUIRE(fd >= 0);
    REQUIRE(write_all(fd, "go"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // send now stuck in flight
    REQUIRE(write_all(fd, "k"));
    const auto [bytes, eof] = read_to_eof(fd);
    CHECK(eof);
    CHECK(bytes.size() < 2 + probe.bulk_reply);  // cut short by the abort
    CHECK(eventually([&] { return probe.destroyed.load() == 1; }));
    CHECK(probe.closed.load() == 1);
    CHECK(eventually([&] { return lb.stats().open.load() == 0; }));
    ::close(fd);
  }

  TEST_CASE("a peer that vanishes mid-reply is cleaned up") {
    Probe probe;
    probe.bulk_reply = 16u << 20;
    auto opts = echo_listener(probe);
    opts.output_high_water = 4u << 20;
    Loopback lb(2, std::move(opts));
    for (int i = 0; i < 8; ++i) {
      const int fd = connect_to(lb.port());
      REQUIRE(fd >= 0);
      REQUIRE(write_all(fd, "go"));
      linger lg{1, 0};  // close with RST
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      ::close(fd);
    }
    CHECK(eventually([&] { return probe.destroyed.load() == 8; }));
    CHECK(probe.closed.load() == 8);
    CHECK(eventually([&] { return lb.stats().open.load() == 0; }));
  }

  TEST_CASE("connections over max_connections are closed at once and counted") {
    Probe probe;
    auto opts = echo_listener(probe);
    opts.max_connections = 2;
    Loopback lb(1, std::move(opts));
    const int a = connect_to(lb.port());
    const int b = connect_to(lb.port());
    REQUIRE(write_all(a, "1"));
    REQUIRE(write_all(b, "2"));
    CHECK(read_exact(a, 1) == "1");
    CHECK(read_exact(b, 1) == "2");
    const int c = connect_to(lb.port());
    REQUIRE(c >= 0);
    const auto [bytes, eof] = read_to_eof(c);
    CHECK(eof);
    CHECK(bytes.empty());
    CHECK(lb.stats().rejected_total.load() == 1);
    CHECK(lb.stats().accepted_total.load() == 2);
    CHECK(probe.created.load() == 2);
    for (int fd : {a, b, c}) ::close(fd);
  }

  TEST_CASE("an idle connection gets on_shutdown, then is closed") {
    Probe probe;
    auto opts = echo_listener(probe);
    opts.idle_timeout_us = 50'000;
    Loopback lb(1, std::move(opts));
    const int fd = connect_to(lb.port());
    REQUIRE(fd >= 0);
    const auto [bytes, eof] = read_to_eof(fd);
    CHECK(eof);
    CHECK(bytes.empty());
    CHECK(eventually([&] { return probe.closed.load() == 1; }));
    CHECK(probe.shutdowns.load() == 1);
    ::close(fd);
  }

  TEST_CASE("a busy connection is not closed by the idle timeout") {
    CallInFlight c(1, 30'000);
    CHECK(test::quiet_for(c.fd, 150));  // no EOF: a call is in flight
    CHECK(c.probe.shutdowns.load() == 0);
    REQUIRE(write_all(c.fd, "x"));
    CHECK(read_exact(c.fd, 1) == "x");
    const auto [bytes, eof] = read_to_eof(c.fd);  // now idle: closed
    CHECK(eof);
    CHECK(c.probe.shutdowns.load() == 1);
  }

  TEST_CASE("a peer that stops reading is cut off after the idle timeout") {
    Probe probe;
    probe.bulk_reply = 16u << 20;
    auto opts = echo_listener(probe);
    opts.output_high_water = 4u << 20;
    opts.idle_timeout_us = 100'000;
    Loopback lb(1, std::move(opts));
    const int fd = connect_to(lb.port());
    REQUIRE(write_all(fd, "go"));
    // Never read: the server's output stalls, then the connection is aborted.
    CHECK(eventually([&] { return probe.closed.load() == 1; }));
    CHECK(probe.destroyed.load() == 1);
    CHECK(eventually([&] { return lb.stats().open.load() == 0; }));
    ::close(fd);
  }

  TEST_CASE("graceful shutdown: no new connections, in-flight work finishes, then done") {
    CallInFlight c(2);
    std::atomic<bool> done{false};
    c.lb.server().shutdown(5'000'000, [&] { done.store(true); });
    CHECK(connect_to(c.lb.port()) < 0);  // refused as soon as shutdown() returned
    CHECK(eventually([&] { return c.probe.shutdowns.load() == 1; }));
    CHECK_FALSE(done.load());
    REQUIRE(write_all(c.fd, "x"));  // the "call" completes
    CHECK(read_exact(c.fd, 1) == "x");
    const auto [bytes, eof] = read_to_eof(c.fd);
    CHECK(eof);
    CHECK(eventually([&] { return done.load(); }));
    CHECK(c.probe.closed.load() == 1);
  }

  TEST_CASE("graceful shutdown aborts what is still busy after the grace period") {
    CallInFlight c(1);
    std::atomic<bool> done{false};
    c.lb.server().shutdown(50'000, [&] { done.store(true); });
    const auto [bytes, eof] = read_to_eof(c.fd);
    CHECK(eof);
    CHECK(eventually([&] { return done.load(); }));
    CHECK(c.probe.closed.load() == 1);
    CHECK(c.probe.destroyed.load() == 1);
  }

  TEST_CASE("request_flush after a cross-core round trip sends the reply") {
    Probe probe;
    probe.reply_cross_core = true;
    Loopback lb(2, echo_listener(probe));
    const int fd = connect_to(lb.port());
    REQUIRE(write_all(fd, "ping"));
    CHECK(read_exact(fd, 6) == "R:ping");
    ::close(fd);
  }

  TEST_CASE("stopping the runtime with open connections closes them") {
    Probe probe;
    {
      Loopback lb(2, echo_listener(probe));
      std::vector<int> fds;
      for (int i = 0; i < 4; ++i) {
        fds.push_back(connect_to(lb.port()));
        REQUIRE(write_all(fds.back(), "z"));
        CHECK(read_exact(fds.back(), 1) == "z");
      }
      lb.stop();
      CHECK(probe.closed.load() == 4);
      CHECK(probe.destroyed.load() == 4);
      for (int fd : fds) ::close(fd);
    }
  }

  TEST_CASE("a busy port is an error at add_listener") {
    ic::runtime::Runtime::Options o;
    o.cores = 1;
    o.pin_threads = false;
    o.backend = ic::testing::reactor_backend();
    ic::runtime::Runtime rt(o);
    ic::net::Server first(rt);
    ic::net::ListenerOptions a;
    a.name = "a";
    a.address = "127.0.0.1:0";
    a.factory = [](ic::net::Connection&) { return std::unique_ptr<ic::net::Session>(); };
    REQUIRE(first.add_listener(a).empty());
    ic::net::ListenerOptions b = a;
    b.name = "b";
    b.address = "127.0.0.1:" + std::to_string(first.port("a"));
    CHECK(first.add_listener(b) == "bind " + b.address + ": Address already in use");
    ic::net::ListenerOptions bad = a;
    bad.address = "nope";
    CHECK(first.add_listener(bad) == "\"nope\": missing \":port\"");
  }
}
