#pragma once
// The plain echo net::Session the network tests and the loopback benchmark
// (perf/net_echo.cc) run: every byte received is sent back at the next
// flush, optionally after a greeting sent from the constructor (output before
// a TLS handshake finished must be held, then encrypted).

#include <span>
#include <string_view>
#include <vector>

#include "net/session.hh"

namespace ic::test {

class EchoSession final : public net::Session {
 public:
  explicit EchoSession(net::Connection& connection, std::string_view greeting = {})
      : conn_(connection) {
    if (!greeting.empty()) conn_.send(std::as_bytes(std::span(greeting.data(), greeting.size())));
  }
  bool on_data(std::span<const std::byte> data) override {
    pending_.insert(pending_.end(), data.begin(), data.end());
    return true;
  }
  void flush() override {
    if (pending_.empty()) return;
    conn_.send(pending_);
    pending_.clear();
  }
  void on_shutdown() override {}
  bool idle() const override { return true; }
  void on_close() override {}

 private:
  net::Connection& conn_;
  std::vector<std::byte> pending_;
};

}  // namespace ic::test
