#pragma once
// The composition root's handle on the network: TCP listeners, each with its
// own SessionFactory (gRPC on :9090, HTTP/1.1 admin on :8080/:8081), driven by
// the per-core reactors.
//
// Accepting: every listener binds one SO_REUSEPORT socket per core and each
// core runs a multishot accept on its own socket. The kernel spreads new
// connections over the cores by 4-tuple hash, so there is no acceptor core and
// no fd hand-off message, and a connection is born on the core that serves it
// for its whole life (docs/architecture.md rule 1). The price is hash imbalance for
// a handful of long-lived connections; that is acceptable because the heavy
// work (index lookups, ingest) is routed to the tenant's owner core anyway.
//
// Lifecycle (rule 10): construct after the Runtime; add_listener() before
// Runtime::start() (bind errors surface at startup); start_core() from the
// runtime's on_start hook once services are ready (listeners last);
// shutdown() on SIGTERM; destroy only after Runtime::join().

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "net/session.hh"
#include "runtime/runtime.hh"

namespace ic::net {

struct ListenerOptions {
  // Short name for logs and stats lookups ("grpc", "http", "snapshot").
  std::string name;
  // "[host]:port", see net/address.hh.
  std::string address;
  // Builds the protocol for each accepted connection, on its core.
  SessionFactory factory;
  // Open connections on this listener (all cores); further accepts are
  // closed at once and counted in rejected_total (rule 9).
  std::uint32_t max_connections = 10000;
  // Close a connection whose Session is idle() after this long without
  // traffic (µs); it gets on_shutdown() first (GOAWAY). Also the longest its
  // queued output may go without any send progress (a peer that stopped
  // reading) before the connection is aborted. 0 disables both.
  std::int64_t idle_timeout_us = 0;
  // A connection older than this (µs; each connection's own age is jittered
  // by up to ±10%, so a fleet's connections do not all go at once) gets
  // Session::on_max_age() (HTTP/2 GOAWAY; the server stays up, so its calls,
  // long-lived streams included, run on and health watchers hear nothing),
  // closes once its Session is idle(), and is aborted, cutting the streams
  // still open, max_connection_age_grace_us after the GOAWAY. Clients then
  // reconnect and spread over the servers behind their balancer (grpc-go's
  // MaxConnectionAge / MaxConnectionAgeGrace). 0 disables.
  std::int64_t max_connection_age_us = 0;
  std::int64_t max_connection_age_grace_us = 0;
  // Longest the peer may keep a header block, a frame or a request message
  // partly sent (µs, Session::peer_wait kinds kHeaderBlock / kMessageBody),
  // however slowly it trickles bytes meanwhile; past it the connection is cut
  // (docs/hostile-peers.md). 0 disables.
  std::int64_t request_timeout_us = 10'000'000;
  // Output bytes queued on one connection above which reading pauses until it
  // drains below half (rule 5). A connection whose queue passes 16× this (the
  // protocol ignored queued_bytes()) is aborted.
  std::size_t output_high_water = std::size_t{1} << 20;
};

// Per-listener counters; atomics touched only on accept/close (never per
// request), read by the metrics scrape.
struct ListenerStats {
  std::atomic<std::int64_t> open{0};             // connections open now
  std::atomic<std::uint64_t> accepted_total{0};  // connections accepted
  std::atomic<std::uint64_t> rejected_total{0};  // closed at once: over max_connections
};

class Server {
 public:
  explicit Server(runtime::Runtime& runtime);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listener's sockets (one per core) now. Returns "" on success or
  // a one-line reason ("--grpc-bind-address ...: address already in use" is
  // the caller's to prefix). Call before Runtime::start().
  std::string add_listener(ListenerOptions options);

  // Port the named listener is bound to (resolves ":0"); 0 if unknown.
  std::uint16_t port(std::string_view name) const;
  // Counters of the named listener; nullptr if unknown.
  const ListenerStats* stats(std::string_view name) const;
  // Names of the listeners, in the order added.
  std::vector<std::string> listener_names() const;

  // Arms the accepts of `core` and hooks the net layer into its reactor. Call
  // on that core's thread (Runtime::start's on_start), after the services.
  void start_core(unsigned core);

  // Graceful stop, called once from a non-reactor thread (the signal-handling
  // thread): every listening socket stops accepting before this returns; then
  // every core closes its listener fds, calls Session::on_shutdown() on each
  // connection, closes each one as soon as its Session is idle() and its
  // output is written, and aborts the rest after `grace_us`. `done` runs once,
  // on a reactor thread, when every core has no connection left.
  void shutdown(std::int64_t grace_us, std::function<void()> done);
  // Same, for the named listeners only (e.g. {"grpc"}): the others keep
  // accepting and serving (the admin listeners answer /readyz "draining" and
  // /metrics while gRPC drains) until Runtime::stop() aborts them.
  void shutdown(std::int64_t grace_us, std::function<void()> done,
                std::vector<std::string> listeners);

  // Connections open on the calling core (for tests and per-core gauges).
  std::size_t connections_on_this_core() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ic::net
