#include "admin/http_session.hh"

#include <cstddef>
#include <string>

#include "metrics/registry.hh"
#include "runtime/runtime.hh"

namespace ic::admin {

namespace detail {
// Ties one request's Responder to its session; cleared when the connection
// closes so a late cross-core answer is dropped instead of touching freed
// memory. Only the connection's core touches it.
struct SessionLink {
  HttpSession* session = nullptr;
  bool answered = false;
};
}  // namespace detail

namespace {
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
}  // namespace

TimerSource& reactor_timers() { return runtime::current_reactor(); }

void Responder::operator()(HttpResponse response) const {
  if (!link_ || link_->answered) return;
  link_->answered = true;
  if (link_->session != nullptr) link_->session->complete(std::move(response));
}

HttpSession::HttpSession(net::Connection& connection, HttpHandler handler, TimerSource& timers,
                         HttpSessionOptions options)
    : connection_(connection),
      handler_(std::move(handler)),
      timers_(timers),
      options_(options),
      parser_(options.limits),
      self_(std::make_shared<HttpSession*>(this)) {
  arm_timer();
}

HttpSession::~HttpSession() {
  *self_ = nullptr;
  if (link_) link_->session = nullptr;
  if (timer_armed_) timers_.cancel_timer(timer_id_);
}

bool HttpSession::on_data(std::span<const std::byte> data) {
  if (closing_) return true;  // the error answer is on its way; drop the rest
  parser_.feed(data);
  serve();
  return true;
}

void HttpSession::flush() {
  if (closing_ || busy_) return;
  if (paused_ && connection_.queued_bytes() <= options_.max_queued_output) {
    paused_ = false;
    connection_.resume_reading();
  }
  serve();
}

void HttpSession::on_shutdown() {
  draining_ = true;
  if (!busy_ && !closing_) {
    closing_ = true;
    connection_.close();
  }
}

void HttpSession::on_close() {
  closing_ = true;
  if (link_) link_->session = nullptr;
  *self_ = nullptr;
  if (timer_armed_) {
    timers_.cancel_timer(timer_id_);
    timer_armed_ = false;
  }
}

void HttpSession::serve() {
  serving_ = true;
  while (!busy_ && !closing_) {
    if (connection_.queued_bytes() > options_.max_queued_output) {
      // The peer is not reading its answers: stop taking requests until it does.
      if (!paused_) {
        paused_ = true;
        connection_.pause_reading();
      }
      break;
    }
    const HttpParser::State state = parser_.next();
    if (state == HttpParser::State::kNeedMore) {
      if (parser_.wants_continue() && !continue_sent_) {
        continue_sent_ = true;
        send(std::string(kContinue));
      }
      break;
    }
    if (state == HttpParser::State::kError) {
      answer_error(parser_.error());
      break;
    }
    HttpRequest request = parser_.take_request();
    busy_ = true;
    continue_sent_ = false;
    keep_alive_ = request.keep_alive && !draining_;
    head_ = request.method == "HEAD";
    link_ = std::make_shared<detail::SessionLink>(detail::SessionLink{this, false});
    handler_(request, Responder(link_));
    if (busy_ && !paused_) {
      // Answer pending on another core: hold pipelined input meanwhile.
      paused_ = true;
      connection_.pause_reading();
    }
  }
  serving_ = false;
  arm_timer();
}

void HttpSession::complete(HttpResponse response) {
  if (closing_) return;
  metrics::local().add_http_request();
  // Shutdown may have begun while this request was served elsewhere.
  const bool keep_alive = keep_alive_ && !draining_;
  send(serialize(response, keep_alive, head_));
  busy_ = false;
  link_.reset();
  if (!keep_alive) {
    closing_ = true;
    connection_.close();
  }
  // An answer from outside serve() (a cross-core reply) needs a flush turn to
  // resume reading and serve the pipelined requests.
  if (!serving_) connection_.request_flush();
}

void HttpSession::answer_error(const HttpError& error) {
  metrics::local().add_http_request();
  send(serialize(HttpResponse::text(error.status, error.reason), false));
  closing_ = true;
  connection_.close();
}

void HttpSession::send(const std::string& bytes) {
  connection_.send(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

void HttpSession::arm_timer() {
  if (closing_) return;
  // While a request is served the handler owns the clock; otherwise either a
  // partial request (slow sender) or an idle keep-alive connection is timed.
  const bool want = !busy_;
  const bool for_request = parser_.in_progress();
  if (timer_armed_ && want && for_request == timer_for_request_) return;
  if (timer_armed_) {
    timers_.cancel_timer(timer_id_);
    timer_armed_ = false;
  }
  if (!want) return;
  const std::uint64_t generation = ++timer_generation_;
  timer_for_request_ = for_request;
  timer_armed_ = true;
  timer_id_ =
      timers_.add_timer(for_request ? options_.request_timeout_us : options_.idle_timeout_us,
                        [self = self_, generation]() {
                          if (*self != nullptr) (*self)->on_timer(generation);
                        });
}

void HttpSession::on_timer(std::uint64_t generation) {
  if (generation != timer_generation_ || closing_) return;
  timer_armed_ = false;
  if (timer_for_request_) {
    answer_error(HttpError{408, "request not completed in time"});
  } else {
    closing_ = true;
    connection_.close();
  }
}

}  // namespace ic::admin
