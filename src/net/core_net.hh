#pragma once
// Per-core and per-listener state of net::Server (private to src/net).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "net/server.hh"
#include "net/tcp_connection.hh"
#include "runtime/runtime.hh"

namespace ic::net {

// One listener: its options, counters and the bound socket of each core.
struct ListenerState {
  ListenerOptions options;
  ListenerStats stats;
  std::vector<int> fds;  // fds[core]; -1 once that core closed it
  // The same sockets as bound, never modified: Server::shutdown() stops them
  // listening from the signal thread before any core closes its fd.
  std::vector<int> bound_fds;
  std::uint16_t port = 0;
  std::size_t hard_output_cap() const { return options.output_high_water * 16; }
};

class CoreNet;

// Multishot accept on one core's socket of one listener.
class Acceptor final : public runtime::Reactor::IoHandler {
 public:
  Acceptor(CoreNet& core, ListenerState& listener, int fd);
  ~Acceptor();
  void arm();
  // Stops accepting; the socket is closed once the accept completed.
  void close();
  bool closed() const { return fd_ < 0; }
  const ListenerState& listener() const { return listener_; }
  void on_completion(std::uint8_t op, std::int32_t res, std::uint32_t flags) override;

 private:
  void accept_one(int fd);
  void release();

  CoreNet& core_;
  ListenerState& listener_;
  int fd_;
  runtime::Reactor::IoSlot slot_ = 0;
  bool registered_ = false;
  bool armed_ = false;
  bool closing_ = false;
  runtime::Reactor::TimerId retry_timer_ = 0;
};

// The net layer's state on one core: its acceptors and connections.
class CoreNet {
 public:
  explicit CoreNet(unsigned core) : core_(core) {}
  ~CoreNet();

  // Binds to the running reactor of this core and arms the acceptors.
  void start(runtime::Reactor& reactor, std::vector<ListenerState*> listeners);
  runtime::Reactor& reactor() { return *reactor_; }
  unsigned core() const { return core_; }

  void link(TcpConnection* c);
  void mark_dirty(TcpConnection* c) { dirty_.push_back(c); }
  std::size_t connections() const { return count_; }

  // Stop accepting on the listeners `which` returns true for, drain their
  // connections, abort leftovers after `grace_us`; `drained` runs once none
  // of them is left on this core. Other listeners keep serving.
  void begin_shutdown(std::int64_t grace_us, std::function<void()> drained,
                      std::function<bool(const ListenerState&)> which);
  // Reactor stop hook: abort everything still open.
  void abort_all();

 private:
  void turn_end();
  void check_drained();
  bool draining(const ListenerState& l) const { return shutting_down_ && which_(l); }

  unsigned core_;
  runtime::Reactor* reactor_ = nullptr;
  std::vector<std::unique_ptr<Acceptor>> acceptors_;
  TcpConnection* head_ = nullptr;
  std::size_t count_ = 0;
  std::vector<TcpConnection*> dirty_;
  std::vector<TcpConnection*> work_;
  bool shutting_down_ = false;
  std::function<void()> drained_;
  std::function<bool(const ListenerState&)> which_;  // listeners being shut down
  std::size_t checked_count_ = SIZE_MAX;             // count_ at the last drain check
  runtime::Reactor::TimerId grace_timer_ = 0;
};

}  // namespace ic::net
