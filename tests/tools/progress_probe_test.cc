// The tools' progress figures (elapsed, rate, ETA) and the fast reachability probe that reports
// a refused port or an unknown host at once, with the address.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "common/probe.hh"
#include "common/progress.hh"

using ic::tools::probe_tcp;
using ic::tools::progress_figures;

TEST_CASE("progress figures: elapsed, rate and ETA") {
  CHECK(progress_figures(0, 100, 0) == "0s elapsed  0/s  ETA ?");
  CHECK(progress_figures(500, 1000, 10) == "10s elapsed  50/s  ETA 10s");
  CHECK(progress_figures(6000, 36000, 125) == "2m05s elapsed  48/s  ETA 10m25s");
  CHECK(progress_figures(1, 7201, 1) == "1s elapsed  1/s  ETA 2h00m00s");
  CHECK(progress_figures(10, 10, 4) == "4s elapsed  2/s  ETA 0s");
}

namespace {
// A loopback port that nothing listens on: bound, never listened, kept bound during the test.
struct DeadPort {
  DeadPort() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~DeadPort() { ::close(fd); }
  int fd = -1;
  int port = 0;
};
}  // namespace

TEST_CASE("probe: a refused port names the address and asks the two useful questions") {
  DeadPort dead;
  const std::string where = "127.0.0.1:" + std::to_string(dead.port);
  CHECK(probe_tcp(where, 3000) ==
        "connection refused by " + where + " (is the server running? is the port right?)");
}

TEST_CASE("probe: a listening port passes; bad addresses are named") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  CHECK(probe_tcp("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), 3000) == "");
  ::close(fd);
  CHECK(probe_tcp("no-port", 3000) == "\"no-port\" is not host:port");
  // .invalid never resolves (RFC 6761).
  CHECK(probe_tcp("host.invalid:9090", 3000).rfind("cannot resolve host \"host.invalid\": ", 0) ==
        0);
}
