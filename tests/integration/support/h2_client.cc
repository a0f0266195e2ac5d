#include "support/h2_client.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "support/grpc_frame.hh"
#include "support/text.hh"

namespace ic::itest {

namespace {

constexpr int32_t kStreamWindow = 16 << 20;  // bytes; our receive window per stream
constexpr int32_t kConnectionWindow = 64 << 20;

const H2Response& empty_response() {
  static const H2Response empty;
  return empty;
}

// Large windows so large responses flow without help; DATA frames as large as the server allows.
test::ClientSettings client_settings() {
  test::ClientSettings options;
  options.settings = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  options.connection_window = kConnectionWindow;
  options.large_frames = true;
  return options;
}

// The connected socket to 127.0.0.1:`port`; throws std::runtime_error when the connect fails.
test::OwnedFd connect_to(uint16_t port) {
  test::OwnedFd fd(test::connect_loopback(port));
  if (fd.get() < 0) {
    throw std::runtime_error("connect " + loopback(port) + ": " + std::strerror(errno));
  }
  return fd;
}

}  // namespace

std::optional<std::string> H2Response::find(std::string_view name) const {
  for (const auto* list : {&headers, &trailers}) {
    for (const auto& [k, v] : *list) {
      if (k == name) return v;
    }
  }
  return std::nullopt;
}

int H2Response::http_status() const {
  auto s = find(":status");
  return s ? std::stoi(*s) : 0;
}

std::optional<int> H2Response::grpc_status() const {
  auto s = find("grpc-status");
  if (!s) return std::nullopt;
  return std::stoi(*s);
}

std::string H2Response::grpc_message() const {
  auto s = find("grpc-message");
  return s ? percent_decode(*s) : std::string();
}

H2Client::H2Client(uint16_t port)
    : fd_(connect_to(port)), port_(port), session_(client_settings()) {
  int one = 1;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
}

int32_t H2Client::start(std::string_view path, const BodyPlan& body, const HeaderList& extra) {
  HeaderList headers = {{":method", "POST"},
                        {":scheme", "http"},
                        {":path", std::string(path)},
                        {":authority", loopback(port_)}};
  bool has_content_type = false;
  for (const auto& [k, v] : extra) has_content_type = has_content_type || k == "content-type";
  if (!has_content_type) headers.emplace_back("content-type", "application/grpc");
  headers.emplace_back("te", "trailers");
  headers.insert(headers.end(), extra.begin(), extra.end());
  return start_raw(headers, body);
}

int32_t H2Client::start_raw(const HeaderList& headers, const BodyPlan& body) {
  return session_.request(headers, body.bytes, body.end_stream, body.max_frame);
}

void H2Client::send(int32_t stream_id, std::string_view bytes, bool end_stream,
                    std::size_t max_frame) {
  const auto it = session_.streams.find(stream_id);
  if (it == session_.streams.end() || it->second.closed) {
    throw std::runtime_error("send on a stream with no open body");
  }
  session_.send(stream_id, bytes, end_stream, max_frame);
}

void H2Client::reset(int32_t stream_id, uint32_t error_code) {
  session_.reset(stream_id, error_code);
}

bool H2Client::pump(std::chrono::milliseconds budget) {
  if (eof_) return false;
  outbuf_ += session_.take_output();
  pollfd p{fd_.get(), static_cast<short>(POLLIN | (outbuf_.empty() ? 0 : POLLOUT)), 0};
  int rc = ::poll(&p, 1, static_cast<int>(budget.count()));
  if (rc < 0 && errno != EINTR) eof_ = true;
  if (rc > 0 && (p.revents & POLLOUT) && !outbuf_.empty()) {
    ssize_t w = ::send(fd_.get(), outbuf_.data(), outbuf_.size(), MSG_NOSIGNAL);
    if (w > 0) {
      outbuf_.erase(0, static_cast<std::size_t>(w));
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      eof_ = true;
    }
  }
  if (rc > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
    char buf[65536];
    ssize_t r = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (r > 0) {
      session_.receive(std::string_view(buf, static_cast<std::size_t>(r)));
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      eof_ = true;
    }
  }
  // A failed nghttp2 send or receive also ends the connection.
  if (eof_ || session_.connection_lost()) {
    eof_ = true;
    session_.lose_connection();
    return false;
  }
  return true;
}

bool H2Client::run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (!pump(std::min(left, std::chrono::milliseconds(50)))) return done();
  }
  return true;
}

const H2Response& H2Client::wait(int32_t id, std::chrono::milliseconds timeout) {
  if (!run_until([&] { return response(id).done(); }, timeout)) {
    throw std::runtime_error(numbered("stream ", id) + " did not finish in " +
                             std::to_string(timeout.count()) + " ms");
  }
  return response(id);
}

bool H2Client::wait_all(std::chrono::milliseconds timeout) {
  return run_until(
      [&] {
        return std::all_of(session_.streams.begin(), session_.streams.end(),
                           [](const auto& kv) { return kv.second.done(); });
      },
      timeout);
}

void H2Client::flush(std::chrono::milliseconds timeout) {
  run_until([&] { return outbuf_.empty() && !session_.wants_write(); }, timeout);
}

const H2Response& H2Client::response(int32_t id) const {
  auto it = session_.streams.find(id);
  return it == session_.streams.end() ? empty_response() : it->second;
}

}  // namespace ic::itest
