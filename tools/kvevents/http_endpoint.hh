// The adapter's own HTTP listener (cpp-httplib on one thread): GET /metrics (Prometheus text of
// Counters), /healthz (200 while the subscriber loop turns), /readyz (200 while connected to the
// server, else 503).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kvevents/counters.hh"

namespace ic::tools::kvevents {

class HttpEndpoint {
 public:
  // `alive` and `ready` are polled per request.
  HttpEndpoint(Counters& counters, std::function<bool()> alive, std::function<bool()> ready);
  ~HttpEndpoint();

  // Binds "[host]:port" (empty host: all interfaces). False with *error when it cannot.
  bool start(const std::string& bind_address, std::string* error);
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace ic::tools::kvevents
