#pragma once
// Runs the real inferencecache-server binary for an integration test: free
// loopback ports, readiness by the gRPC health check, SIGTERM stop with the
// exit status (docs/contract.md "Shutdown": exit 0; under ASan a leak report makes
// it non-zero). The binary's path comes from the IC_SERVER_BINARY environment
// variable that tests/integration meson.build files set; IC_REACTOR_BACKEND,
// when set, is passed as --reactor-backend unless the test's own flags name
// one.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ic::itest {

// IC_SERVER_BINARY; throws std::runtime_error when unset.
std::filesystem::path server_binary();

// Whether that binary is a sanitizer build: IC_SANITIZED=1, set by
// tests/meson.build for a sanitizer build tree or -Dserver_under_test. RSS
// bounds are not asserted then (ASan's quarantine keeps freed memory resident).
bool server_sanitized();

// A loopback TCP port that was free a moment ago (bound to 127.0.0.1:0 and
// released). Another process may take it before the server binds it;
// ServerProcess retries with fresh ports when the server exits at startup.
uint16_t free_loopback_port();

// Starts args[0] with `args` (stdin /dev/null, stdout and stderr to
// `log_fd`, which it closes) and returns its pid. Throws std::runtime_error
// when posix_spawn fails.
pid_t spawn_logged(std::vector<std::string> args, int log_fd);

struct ServerOptions {
  // Empty: server_binary().
  std::filesystem::path binary;
  // Runs the server under this command (e.g. {no_io_uring.py}): wrapper,
  // then the binary and its flags. Empty: the binary itself.
  std::vector<std::string> wrapper;
  // Appended after the three bind-address flags (e.g. {"--threads", "2"}).
  std::vector<std::string> extra_args;
  // 0: a free port. Fixed: restart a server where its clients expect it (a taken port makes
  // the start fail after 3 attempts).
  uint16_t grpc_port = 0;
  // Bind the control listener to 0.0.0.0 instead of 127.0.0.1 (tests of the
  // non-loopback warnings; clients still connect over loopback).
  bool snapshot_on_all_interfaces = false;
  // Empty: ready once the gRPC health check (h2c) answers SERVING. Else ready
  // once this text appears in the server's log (a TLS gRPC port, where the
  // h2c check cannot connect).
  std::string ready_when_logged;
  // How long to wait for the health check to answer SERVING (3x against a
  // sanitizer build, server_sanitized()).
  std::chrono::milliseconds ready_timeout = std::chrono::seconds(20);
};

class ServerProcess {
 public:
  // Starts the server with --grpc-bind-address, --http-bind-address and
  // --snapshot-bind-address on free 127.0.0.1 ports and returns once
  // grpc.health.v1.Health/Check for service "" answers SERVING. Throws
  // std::runtime_error (with the server's log) if it is not ready in time, or
  // if it exits at startup 3 times (each retry takes fresh ports, in case
  // another process took one).
  explicit ServerProcess(ServerOptions options = {});
  // Kills the server (SIGKILL) if it still runs; prints its log to stderr
  // unless it was stopped with exit status 0.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  uint16_t grpc_port() const { return grpc_port_; }
  uint16_t http_port() const { return http_port_; }
  uint16_t snapshot_port() const { return snapshot_port_; }
  pid_t pid() const { return pid_; }

  // Sends `sig` to the server.
  void signal(int sig);
  // True while the process has not exited (reaps it if it has).
  bool running();
  // Waits for the exit; returns the exit status, or 128 + signal number when
  // killed by a signal, or -1 if still running after `timeout`.
  int wait_exit(std::chrono::milliseconds timeout);
  // SIGTERM, then wait_exit(`grace`). The contract's answer is 0.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(20));
  // Everything the server wrote to stdout and stderr so far.
  std::string log() const;
  // Polls log() every 20 ms until `text` appears at least `times` times;
  // false if it has not within `within`.
  bool logged(const std::string& text, int times = 1,
              std::chrono::milliseconds within = std::chrono::seconds(20)) const;

 private:
  bool launch(const ServerOptions& options);
  bool wait_ready(std::chrono::milliseconds timeout, const std::string& ready_when_logged);

  pid_t pid_ = -1;
  int exit_status_ = -1;  // valid once exited_
  bool exited_ = false;
  uint16_t grpc_port_ = 0;
  uint16_t http_port_ = 0;
  uint16_t snapshot_port_ = 0;
  std::string log_path_;
};

// True when grpc.health.v1.Health/Check for service "" answers SERVING on
// 127.0.0.1:`grpc_port` within `timeout`.
bool health_serving(uint16_t grpc_port, std::chrono::milliseconds timeout);

}  // namespace ic::itest
