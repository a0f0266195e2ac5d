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

nghttp2_nv make_nv(const std::string& name, const std::string& value) {
  // nghttp2 copies name and value during submit (no NO_COPY flags).
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// A stream's request body: bytes not yet handed to nghttp2, and whether to
// half-close after them.
struct H2Client::Outgoing {
  std::string data;
  std::size_t offset = 0;
  std::size_t max_frame = 0;
  bool end_stream = false;
  bool deferred = false;  // the read callback returned NGHTTP2_ERR_DEFERRED
};

struct H2Client::Callbacks {
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       std::size_t namelen, const uint8_t* value, std::size_t valuelen, uint8_t,
                       void* user) {
    auto* self = static_cast<H2Client*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto& r = self->responses_[frame->hd.stream_id];
    std::pair<std::string, std::string> field{
        std::string(reinterpret_cast<const char*>(name), namelen),
        std::string(reinterpret_cast<const char*>(value), valuelen)};
    if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
      r.headers.push_back(std::move(field));
    } else {
      r.trailers.push_back(std::move(field));
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<H2Client*>(user);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
          self->responses_[frame->hd.stream_id].remote_ended = true;
        }
        break;
      case NGHTTP2_RST_STREAM: {
        auto& r = self->responses_[frame->hd.stream_id];
        r.reset = true;
        r.close_error_code = frame->rst_stream.error_code;
        break;
      }
      case NGHTTP2_GOAWAY:
        self->goaway_ = true;
        self->goaway_last_stream_id_ = frame->goaway.last_stream_id;
        break;
      default:
        break;
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                           std::size_t len, void* user) {
    auto* self = static_cast<H2Client*>(user);
    self->responses_[stream_id].body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
    auto* self = static_cast<H2Client*>(user);
    auto& r = self->responses_[stream_id];
    if (!r.closed) {
      r.closed = true;
      if (!r.reset) r.close_error_code = error_code;
      if (self->open_ > 0) --self->open_;
    }
    self->outgoing_.erase(stream_id);
    return 0;
  }

  static ssize_t on_read_body(nghttp2_session*, int32_t, uint8_t* buf, std::size_t length,
                              uint32_t* data_flags, nghttp2_data_source* source, void*) {
    auto* out = static_cast<Outgoing*>(source->ptr);
    std::size_t left = out->data.size() - out->offset;
    if (left == 0 && !out->end_stream) {
      out->deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    std::size_t n = std::min(left, length);
    if (out->max_frame > 0) n = std::min(n, out->max_frame);
    std::memcpy(buf, out->data.data() + out->offset, n);
    out->offset += n;
    if (out->offset == out->data.size()) {
      // Consumed bytes are dropped so a long-lived stream does not keep them.
      out->data.clear();
      out->offset = 0;
      if (out->end_stream) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
  }

  // Lets one DATA frame be as large as the server's SETTINGS_MAX_FRAME_SIZE
  // (nghttp2 otherwise stops at 16 KiB).
  static ssize_t on_read_length(nghttp2_session*, uint8_t, int32_t, int32_t session_window,
                                int32_t stream_window, uint32_t remote_max_frame, void*) {
    int64_t n = std::min<int64_t>({session_window, stream_window, remote_max_frame});
    return static_cast<ssize_t>(std::max<int64_t>(n, 1));
  }
};

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

H2Client::H2Client(uint16_t port) : port_(port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd_);
    throw std::runtime_error("connect " + loopback(port) + ": " + std::strerror(err));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);

  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_data_source_read_length_callback(cbs, &Callbacks::on_read_length);
  int rv = nghttp2_session_client_new(&session_, cbs, this);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) throw std::runtime_error("nghttp2_session_client_new failed");

  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                       {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
}

H2Client::~H2Client() {
  if (session_ != nullptr) nghttp2_session_del(session_);
  if (fd_ >= 0) ::close(fd_);
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
  std::vector<nghttp2_nv> nva;
  nva.reserve(headers.size());
  for (const auto& [k, v] : headers) nva.push_back(make_nv(k, v));

  auto out = std::make_unique<Outgoing>();
  out->data = body.bytes;
  out->max_frame = body.max_frame;
  out->end_stream = body.end_stream;
  nghttp2_data_provider provider{};
  provider.source.ptr = out.get();
  provider.read_callback = &Callbacks::on_read_body;
  bool no_body = body.bytes.empty() && body.end_stream;
  int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                      no_body ? nullptr : &provider, nullptr);
  if (id < 0)
    throw std::runtime_error(std::string("nghttp2_submit_request: ") + nghttp2_strerror(id));
  responses_[id];
  if (!no_body) outgoing_[id] = std::move(out);
  ++open_;
  return id;
}

void H2Client::send(int32_t stream_id, std::string_view bytes, bool end_stream,
                    std::size_t max_frame) {
  auto it = outgoing_.find(stream_id);
  if (it == outgoing_.end()) throw std::runtime_error("send on a stream with no open body");
  Outgoing& out = *it->second;
  out.data.append(bytes);
  out.end_stream = end_stream;
  if (max_frame > 0) out.max_frame = max_frame;
  if (out.deferred) {
    out.deferred = false;
    nghttp2_session_resume_data(session_, stream_id);
  }
}

void H2Client::reset(int32_t stream_id, uint32_t error_code) {
  auto& r = responses_[stream_id];
  r.reset = true;
  r.close_error_code = error_code;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, error_code);
}

bool H2Client::pump(std::chrono::milliseconds budget) {
  if (eof_) return false;
  for (;;) {
    const uint8_t* data = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      eof_ = true;
      return false;
    }
    if (n == 0) break;
    outbuf_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  pollfd p{fd_, static_cast<short>(POLLIN | (outbuf_.empty() ? 0 : POLLOUT)), 0};
  int rc = ::poll(&p, 1, static_cast<int>(budget.count()));
  if (rc < 0 && errno != EINTR) {
    eof_ = true;
    return false;
  }
  if (rc <= 0) return true;
  if ((p.revents & POLLOUT) && !outbuf_.empty()) {
    ssize_t w = ::send(fd_, outbuf_.data(), outbuf_.size(), MSG_NOSIGNAL);
    if (w > 0) {
      outbuf_.erase(0, static_cast<std::size_t>(w));
    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
      eof_ = true;
    }
  }
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
    char buf[65536];
    ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r > 0) {
      ssize_t used = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buf),
                                              static_cast<std::size_t>(r));
      if (used < 0) eof_ = true;
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      eof_ = true;
    }
  }
  if (eof_) {
    // The connection is gone: nothing more will arrive on any stream.
    for (auto& [id, r] : responses_) {
      if (!r.closed) {
        r.closed = true;
        r.connection_lost = true;
      }
    }
    open_ = 0;
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
        return std::all_of(responses_.begin(), responses_.end(),
                           [](const auto& kv) { return kv.second.done(); });
      },
      timeout);
}

void H2Client::flush(std::chrono::milliseconds timeout) {
  run_until([&] { return outbuf_.empty() && nghttp2_session_want_write(session_) == 0; }, timeout);
}

const H2Response& H2Client::response(int32_t id) const {
  auto it = responses_.find(id);
  return it == responses_.end() ? empty_response() : it->second;
}

uint32_t H2Client::remote_max_concurrent_streams() const {
  return nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

}  // namespace ic::itest
