// Runs the real inferencecache-kvevents binary for an end-to-end test (path from the
// IC_KVEVENTS_BINARY environment variable), reads its /metrics, and stops it with SIGTERM.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ic::tools::kvevents::test {

class AdapterProcess {
 public:
  // Starts the adapter with `args` plus --http-bind-address on a free loopback port, --log-format
  // text, and waits (up to 30 s) until /metrics answers and it is connected to the server.
  explicit AdapterProcess(std::vector<std::string> args);
  // SIGTERM, then SIGKILL after 20 s; prints the adapter's log when it did not exit 0.
  ~AdapterProcess();
  AdapterProcess(const AdapterProcess&) = delete;
  AdapterProcess& operator=(const AdapterProcess&) = delete;

  // The value of series `name{labels}` (labels as `k="v"`, empty for none); nullopt if absent.
  std::optional<double> metric(const std::string& name, const std::string& labels = "") const;
  // Polls until metric(name, labels) ≥ at_least; false after `timeout`.
  bool wait_metric(const std::string& name, const std::string& labels, double at_least,
                   std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  // GET `path` on the adapter's HTTP listener: status code (0 if unreachable).
  int http_status(const std::string& path) const;
  // SIGTERM and wait; the exit status (0 is a clean shutdown).
  int stop();
  std::string log() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_status_ = -1;
  std::uint16_t http_port_ = 0;
  std::string log_path_;
};

}  // namespace ic::tools::kvevents::test
