#include "kvevents/http_endpoint.hh"

#include <httplib.h>

#include <charconv>

namespace ic::tools::kvevents {

struct HttpEndpoint::Impl {
  httplib::Server server;
};

HttpEndpoint::HttpEndpoint(Counters& counters, std::function<bool()> alive,
                           std::function<bool()> ready)
    : impl_(std::make_unique<Impl>()) {
  impl_->server.Get("/metrics", [&counters](const httplib::Request&, httplib::Response& res) {
    res.set_content(counters.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  impl_->server.Get("/healthz", [alive](const httplib::Request&, httplib::Response& res) {
    const bool ok = alive();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ok\n" : "event loop stalled\n", "text/plain");
  });
  impl_->server.Get("/readyz", [ready](const httplib::Request&, httplib::Response& res) {
    const bool ok = ready();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ok\n" : "not connected to the InferenceCache server\n", "text/plain");
  });
}

HttpEndpoint::~HttpEndpoint() { stop(); }

bool HttpEndpoint::start(const std::string& bind_address, std::string* error) {
  const std::size_t colon = bind_address.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const char* last = bind_address.data() + bind_address.size();
    const auto [ptr, ec] = std::from_chars(bind_address.data() + colon + 1, last, port);
    if (ec != std::errc() || ptr != last) port = -1;
  }
  if (port < 0 || port > 65535) {
    *error = "--http-bind-address: want [host]:port, got \"" + bind_address + "\"";
    return false;
  }
  std::string host = bind_address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  if (!impl_->server.bind_to_port(host, port)) {
    *error = "cannot listen on " + bind_address;
    return false;
  }
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  return true;
}

void HttpEndpoint::stop() {
  if (!thread_.joinable()) return;
  impl_->server.stop();
  thread_.join();
}

}  // namespace ic::tools::kvevents
