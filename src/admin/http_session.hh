#pragma once
// The admin listeners' HTTP/1.1 protocol as a sans-IO net::Session
// (src/net/session.hh). One request is served at a time per connection, in
// arrival order, so pipelined requests get their responses in order; a
// handler may answer later (a cross-core scrape) and the session resumes the
// buffered requests when it does. Timers close slow senders (the request must
// be complete within `request_timeout_us` of its first byte) and idle
// keep-alive connections, so a bad client never holds anything for long and
// never stalls the core.

#include <cstdint>
#include <functional>
#include <memory>

#include "admin/http_parser.hh"
#include "admin/http_response.hh"
#include "net/session.hh"
#include "runtime/task.hh"
#include "runtime/timers.hh"

namespace ic::admin {

namespace detail {
struct SessionLink;
}

// Answers one request exactly once, now or later, on the connection's core.
// A call after the connection closed is a no-op; copies share one answer
// (only the first call counts).
class Responder {
 public:
  explicit Responder(std::shared_ptr<detail::SessionLink> link) : link_(std::move(link)) {}
  void operator()(HttpResponse response) const;

 private:
  std::shared_ptr<detail::SessionLink> link_;
};

// Serves one parsed request: must eventually call `respond` once.
using HttpHandler = std::function<void(HttpRequest& request, Responder respond)>;

// One-shot timers on the connection's core: the one timer API of
// runtime/timers.hh (the reactor in production, a manual clock in tests).
using TimerSource = runtime::Timers;

// The calling reactor's timers (runtime::current_reactor()); call on a
// reactor thread.
TimerSource& reactor_timers();

struct HttpSessionOptions {
  HttpLimits limits;
  // First byte of a request → its last body byte, µs; past it: 408 + close.
  std::int64_t request_timeout_us = 10'000'000;
  // No request in progress and none in flight for this long, µs: close.
  std::int64_t idle_timeout_us = 60'000'000;
  // Output queued on the socket above this (bytes): stop serving pipelined
  // requests until the peer reads (docs/architecture.md rule 5).
  std::size_t max_queued_output = 8u << 20;
};

class HttpSession final : public net::Session {
 public:
  HttpSession(net::Connection& connection, HttpHandler handler, TimerSource& timers,
              HttpSessionOptions options = {});
  ~HttpSession() override;

  bool on_data(std::span<const std::byte> data) override;
  void flush() override;
  void on_shutdown() override;
  bool idle() const override { return !busy_; }
  void on_close() override;

  // Called through Responder.
  void complete(HttpResponse response);

 private:
  // Parses and serves buffered requests until one goes async, input runs
  // out, output backs up or the connection closes.
  void serve();
  void answer_error(const HttpError& error);
  void send(const std::string& bytes);
  void arm_timer();
  void on_timer(std::uint64_t generation);

  net::Connection& connection_;
  HttpHandler handler_;
  TimerSource& timers_;
  HttpSessionOptions options_;
  HttpParser parser_;
  std::shared_ptr<detail::SessionLink> link_;  // current request's responder link
  bool busy_ = false;                          // a request is being served
  bool keep_alive_ = true;                     // of the request being served
  bool head_ = false;                          // it is a HEAD: answer without the body
  bool serving_ = false;   // inside serve(): a sync answer needs no flush request
  bool closing_ = false;   // close() requested; ignore further input
  bool draining_ = false;  // on_shutdown(): answer the current request, then close
  bool paused_ = false;    // pause_reading() in effect
  bool continue_sent_ = false;
  std::uint64_t timer_id_ = 0;
  bool timer_armed_ = false;
  bool timer_for_request_ = false;  // the armed timer is the request (not idle) one
  std::uint64_t timer_generation_ = 0;
  std::shared_ptr<HttpSession*> self_;  // timers hold it to find a live session
};

}  // namespace ic::admin
