#pragma once
// A real nats-server for the replication tests: JetStream on, file storage
// in a directory of the test's, a loopback port nats-server picks itself at
// the first start (no race with the tests running beside it) and keeps
// across restarts (so the servers under test reconnect to the same URL). The binary comes
// from IC_NATS_SERVER (tests/integration/replication/meson.build).

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace ic::itest {

class NatsProcess {
 public:
  // Starts nats-server storing under `store_dir` (reading `config_file`, e.g.
  // a tls block, when given; without JetStream when `jetstream` is false);
  // returns once its log says "Server is ready" and its port accepts
  // connections (throws std::runtime_error when it exits first, e.g. its
  // port taken at a restart, or after 20 s).
  explicit NatsProcess(std::string store_dir, std::string config_file = "", bool jetstream = true);
  ~NatsProcess();  // stop()s
  NatsProcess(const NatsProcess&) = delete;
  NatsProcess& operator=(const NatsProcess&) = delete;

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  // SIGTERM and wait for the exit (then the port is free again).
  void stop();
  // Starts it again on the same port and store (throws as the constructor).
  void start();

 private:
  std::string store_dir_;
  std::string config_file_;
  std::uint16_t port_ = 0;
  bool jetstream_ = true;
  pid_t pid_ = -1;
};

}  // namespace ic::itest
