// TLS certificate rotation on the real server binary, seen by real clients:
// cert-manager (or an operator) replaces the certificate and key files in
// place; new handshakes get the new certificate without a restart (grpc++
// over TLS and `openssl s_client`), a connection made before keeps its
// certificate, a bad pair keeps the last good one (logged), and SIGHUP
// re-reads on demand. TLS handshake failures are logged, rate-limited.
#include <doctest/doctest.h>
#include <grpcpp/grpcpp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"
#include "support/text.hh"

using namespace ic::itest;
using namespace std::chrono_literals;
namespace health = grpc::health::v1;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command; returns its stdout (stderr too when `with_stderr`).
std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  ::pclose(pipe);
  return out;
}

// A self-signed certificate for localhost with common name `cn`.
void make_certificate(const ic::test::TempDir& dir, const std::string& cn) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + cn +
                          " -addext subjectAltName=DNS:localhost -keyout " + dir.file(cn + ".key") +
                          " -out " + dir.file(cn + ".crt") + " 2>/dev/null && echo ok";
  REQUIRE(run(cmd) == "ok\n");
}

// Replaces `to` with a copy of `from` the way a Secret update does (rename).
void install(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to + ".tmp", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(to + ".tmp", to);
}

// A grpc++ TLS channel trusting both test certificates. `fresh` gives each
// channel its own subchannel pool so it opens its own connection.
std::shared_ptr<grpc::Channel> tls_channel(uint16_t port, const std::string& roots, int salt) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = roots;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  args.SetInt("ic.test.channel", salt);  // distinct args: no shared subchannel
  auto channel = grpc::CreateCustomChannel(loopback(port), grpc::SslCredentials(ssl), args);
  REQUIRE(channel->WaitForConnected(deadline_in(10s)));
  return channel;
}

// Health/Check over `channel`; returns the server certificate's common name.
std::string served_common_name(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = health::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(10s));
  health::HealthCheckRequest req;
  health::HealthCheckResponse resp;
  const grpc::Status status = stub->Check(&ctx, req, &resp);
  REQUIRE(status.ok());
  CHECK(resp.status() == health::HealthCheckResponse::SERVING);
  const auto names = ctx.auth_context()->FindPropertyValues("x509_common_name");
  REQUIRE(names.size() == 1);
  return std::string(names[0].data(), names[0].size());
}

// The subject `openssl s_client` sees on a fresh handshake.
std::string s_client_subject(uint16_t port) {
  const std::string out = run("echo | openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                              " -alpn h2 2>/dev/null | openssl x509 -noout -subject 2>/dev/null");
  return out;
}

// Sends an HTTP/1.1 request in clear text and waits for the server to close.
void send_plaintext(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char buf[512];
  while (::recv(fd, buf, sizeof buf, 0) > 0) {
  }
  ::close(fd);
}

}  // namespace

TEST_CASE("TLS: rotated certificate files serve new handshakes without a restart") {
  ic::test::TempDir dir("ic-tls");
  make_certificate(dir, "first");
  make_certificate(dir, "second");
  const std::string cert = dir.file("tls.crt");
  const std::string key = dir.file("tls.key");
  install(dir.file("first.crt"), cert);
  install(dir.file("first.key"), key);
  const std::string roots = read_file(dir.file("first.crt")) + read_file(dir.file("second.crt"));

  ServerOptions options;
  options.extra_args = {"--threads",       "2",  "--pin-threads=false", "--insecure-disable-auth",
                        "--tls-cert-file", cert, "--tls-key-file",      key};
  options.ready_when_logged = "\"msg\":\"serving\"";
  ServerProcess server(options);
  CHECK(s_client_subject(server.grpc_port()) == "subject=CN = first\n");
  auto before = tls_channel(server.grpc_port(), roots, 1);
  CHECK(served_common_name(before) == "first");

  // In-place rotation: picked up by the file watch within a few seconds.
  install(dir.file("second.crt"), cert);
  install(dir.file("second.key"), key);
  REQUIRE(server.logged("\"msg\":\"TLS certificate reloaded\"", 1));
  CHECK(server.log().find("\"subject\":\"CN=second\"") != std::string::npos);
  CHECK(s_client_subject(server.grpc_port()) == "subject=CN = second\n");
  CHECK(served_common_name(tls_channel(server.grpc_port(), roots, 2)) == "second");
  // The connection made before keeps its handshake's certificate.
  CHECK(served_common_name(before) == "first");

  // A key that does not match: rejected, logged, the last good pair serves.
  install(dir.file("first.key"), key);
  REQUIRE(server.logged("\"msg\":\"TLS certificate rejected\"", 1));
  CHECK(server.log().find("key does not match the certificate") != std::string::npos);
  CHECK(s_client_subject(server.grpc_port()) == "subject=CN = second\n");

  // SIGHUP re-reads on demand (here: the first pair again), and never stops the server.
  install(dir.file("first.crt"), cert);
  server.signal(SIGHUP);
  REQUIRE(server.logged("\"trigger\":\"SIGHUP\"", 2));  // "reloading" + the certificate line
  CHECK(s_client_subject(server.grpc_port()) == "subject=CN = first\n");
  CHECK(served_common_name(tls_channel(server.grpc_port(), roots, 3)) == "first");

  // A client speaking plaintext to the TLS port: the failure is logged once
  // per interval, however many there are.
  for (int i = 0; i < 5; ++i) send_plaintext(server.grpc_port());
  REQUIRE(server.logged("\"msg\":\"TLS handshake failed\"", 1));
  // Every connection was closed by the server (after its log call) before
  // send_plaintext returned, so all five have been through the rate limit.
  const std::string log = server.log();
  CHECK(log.find("\"msg\":\"TLS handshake failed\"") ==
        log.rfind("\"msg\":\"TLS handshake failed\""));
  CHECK(server.stop() == 0);
}
