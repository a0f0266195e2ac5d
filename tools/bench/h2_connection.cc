#include "bench/h2_connection.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <stdexcept>

#include "common/grpc_frame.hh"
#include "h2/callbacks.hh"
#include "rpc/status.hh"

namespace ic::tools::bench {

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {

// Status name for a grpc-status trailer value; nullptr beyond the known codes.
const char* grpc_status_name(int code) {
  if (code < 0 || code > static_cast<int>(ic::rpc::StatusCode::kUnauthenticated)) return nullptr;
  return ic::rpc::status_name(static_cast<ic::rpc::StatusCode>(code)).data();
}

int connect_blocking(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw std::runtime_error("cannot resolve " + where);
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : ::connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  int err = rc == 0 ? 0 : errno;
  if (fd >= 0 && rc < 0 && err == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, timeout_ms) == 1) {
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    } else {
      err = ETIMEDOUT;
    }
  }
  if (fd < 0 || err != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot connect to " + where + ": " + std::strerror(err));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

struct H2Connection::Stream {
  std::shared_ptr<const std::string> body;  // a unary call's whole body
  std::size_t offset = 0;                   // bytes of body (or pending) already sent
  bool streaming = false;                   // open_stream(): the body is `pending`, growing
  bool eof = false;                         // end_writes() was called
  std::string pending;

  // The body's next bytes for nghttp2's data provider: up to `length` into buf.
  ssize_t read(std::uint8_t* buf, std::size_t length, std::uint32_t* flags) {
    if (!streaming) {
      const std::size_t n = std::min(length, body->size() - offset);
      std::memcpy(buf, body->data() + offset, n);
      offset += n;
      if (offset == body->size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
    const std::size_t n = std::min(length, pending.size() - offset);
    std::memcpy(buf, pending.data() + offset, n);
    offset += n;
    if (offset == pending.size()) {
      pending.clear();
      offset = 0;
      if (eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
      } else if (n == 0) {
        return NGHTTP2_ERR_DEFERRED;  // write() or end_writes() resumes it
      }
    }
    return static_cast<ssize_t>(n);
  }
  CallOutcome outcome;
  int http_status = 0;
  int grpc_status = -1;
  GrpcFrameDecoder decoder;
};

H2Connection::H2Connection(const std::string& host, int port, int timeout_ms, OnDone on_done)
    : socket_(connect_blocking(host, port, timeout_ms)),
      authority_(host + ":" + std::to_string(port)),
      on_done_(std::move(on_done)) {
  const h2::CallbacksPtr callbacks = h2::make_callbacks({
      .on_header = &H2Connection::on_header,
      .on_data_chunk_recv = &H2Connection::on_data,
      .on_stream_close = &H2Connection::on_close,
  });
  nghttp2_session* session = nullptr;
  if (const int rv = nghttp2_session_client_new(&session, callbacks.get(), this); rv != 0) {
    throw std::runtime_error(std::string("nghttp2_session_client_new: ") + nghttp2_strerror(rv));
  }
  session_.reset(session);
  // Large windows: a load generator must never be the one throttling the flow.
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                             {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
  nghttp2_submit_settings(session_.get(), NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_.get(), NGHTTP2_FLAG_NONE, 0, 1 << 30);
}

// nghttp2_session_del frees its streams without callbacks; open_ frees ours.
H2Connection::~H2Connection() = default;

H2Connection::Socket::~Socket() {
  if (fd_ >= 0) close(fd_);
}

void H2Connection::SessionDeleter::operator()(nghttp2_session* session) const {
  nghttp2_session_del(session);
}

void H2Connection::start(const std::string& path, std::shared_ptr<const std::string> body,
                         std::int64_t intended_ns, std::uint64_t tag) {
  auto stream = std::make_unique<Stream>();
  stream->body = std::move(body);
  stream->outcome.intended_ns = intended_ns;
  stream->outcome.tag = tag;
  submit(path, std::move(stream));
}

std::int32_t H2Connection::open_stream(const std::string& path, std::uint64_t tag) {
  auto stream = std::make_unique<Stream>();
  stream->streaming = true;
  stream->outcome.intended_ns = now_ns();
  stream->outcome.tag = tag;
  return submit(path, std::move(stream));
}

void H2Connection::write(std::int32_t stream_id, std::string_view framed) {
  const auto it = open_.find(stream_id);
  if (it == open_.end() || !it->second->streaming || it->second->eof) return;
  Stream& s = *it->second;
  // Drop what the socket already took once it is the larger part, so the buffer stays bounded
  // by what is still unsent (the caller bounds that through unsent()).
  if (s.offset > 0 && s.offset * 2 >= s.pending.size()) {
    s.pending.erase(0, s.offset);
    s.offset = 0;
  }
  s.pending.append(framed);
  nghttp2_session_resume_data(session_.get(), stream_id);
}

void H2Connection::end_writes(std::int32_t stream_id) {
  const auto it = open_.find(stream_id);
  if (it == open_.end() || !it->second->streaming) return;
  it->second->eof = true;
  nghttp2_session_resume_data(session_.get(), stream_id);
}

std::size_t H2Connection::unsent(std::int32_t stream_id) const {
  const auto it = open_.find(stream_id);
  if (it == open_.end() || !it->second->streaming) return 0;
  return it->second->pending.size() - it->second->offset;
}

std::uint32_t H2Connection::peer_max_streams() const {
  return nghttp2_session_get_remote_settings(session_.get(),
                                             NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

std::int32_t H2Connection::submit(const std::string& path, std::unique_ptr<Stream> stream) {
  auto nv = [](const char* name, const std::string& value) {
    return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name)),
                      reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())),
                      std::strlen(name), value.size(), NGHTTP2_NV_FLAG_NONE};
  };
  static const std::string kPost = "POST", kHttp = "http", kGrpc = "application/grpc",
                           kTrailers = "trailers";
  const nghttp2_nv headers[] = {nv(":method", kPost),         nv(":scheme", kHttp),
                                nv(":authority", authority_), nv(":path", path),
                                nv("content-type", kGrpc),    nv("te", kTrailers),
                                nv("user-agent", user_agent_)};
  nghttp2_data_provider provider{};
  provider.source.ptr = stream.get();
  provider.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                              std::uint32_t* flags, nghttp2_data_source* src, void*) -> ssize_t {
    return static_cast<Stream*>(src->ptr)->read(buf, length, flags);
  };
  const std::int32_t id = nghttp2_submit_request(session_.get(), nullptr, headers,
                                                 std::size(headers), &provider, stream.get());
  if (id < 0) {
    stream->outcome.status = std::string("submit-") + nghttp2_strerror(id);
    stream->outcome.done_ns = now_ns();
    on_done_(std::move(stream->outcome));
    return -1;
  }
  open_.emplace(id, std::move(stream));
  ++active_;
  return id;
}

int H2Connection::on_header(nghttp2_session* session, const nghttp2_frame* frame,
                            const std::uint8_t* name, std::size_t namelen,
                            const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void*) {
  auto* stream =
      static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (!stream) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") {
    stream->http_status = std::atoi(std::string(v).c_str());
  } else if (n == "grpc-status") {
    stream->grpc_status = std::atoi(std::string(v).c_str());
  }
  return 0;
}

int H2Connection::on_data(nghttp2_session* session, std::uint8_t, std::int32_t stream_id,
                          const std::uint8_t* data, std::size_t len, void*) {
  auto* stream = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
  if (stream) stream->decoder.feed({reinterpret_cast<const char*>(data), len});
  return 0;
}

int H2Connection::on_close(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code,
                           void* user) {
  auto* self = static_cast<H2Connection*>(user);
  auto node = self->open_.extract(stream_id);  // owned here until the outcome is delivered
  if (node.empty()) return 0;                  // failed already (fail_all)
  const std::unique_ptr<Stream> stream = std::move(node.mapped());
  auto& outcome = stream->outcome;
  outcome.done_ns = now_ns();
  if (stream->grpc_status >= 0) {
    const char* name = grpc_status_name(stream->grpc_status);
    outcome.status = name ? name : "grpc-" + std::to_string(stream->grpc_status);
  } else if (error_code != NGHTTP2_NO_ERROR) {
    outcome.status = std::string("reset-") + nghttp2_http2_strerror(error_code);
  } else if (stream->http_status != 200 && stream->http_status != 0) {
    outcome.status = "http-" + std::to_string(stream->http_status);
  } else {
    outcome.status = "no-grpc-status";
  }
  stream->decoder.next(&outcome.response);
  --self->active_;
  self->on_done_(std::move(outcome));
  return 0;
}

bool H2Connection::read_socket() {
  std::uint8_t buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(socket_.get(), buffer, sizeof buffer);
    if (n > 0) {
      if (nghttp2_session_mem_recv(session_.get(), buffer, static_cast<std::size_t>(n)) < 0) {
        return false;
      }
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

bool H2Connection::write_socket() {
  for (;;) {
    if (out_off_ == out_.size()) {
      out_.clear();
      out_off_ = 0;
      // Coalesce everything nghttp2 has into one buffer, then one write per turn.
      for (;;) {
        const std::uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(session_.get(), &data);
        if (n < 0) return false;
        if (n == 0) break;
        out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
      }
      if (out_.empty()) return true;
    }
    const ssize_t n =
        ::send(socket_.get(), out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
    if (n > 0) {
      out_off_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

void H2Connection::fail_all() {
  alive_ = false;
  // Completing the streams through nghttp2 would re-enter it; finish them here instead.
  for (auto& [id, stream] : open_) {
    nghttp2_session_set_stream_user_data(session_.get(), id, nullptr);
    stream->outcome.done_ns = now_ns();
    stream->outcome.status = "connection-lost";
    on_done_(std::move(stream->outcome));
  }
  open_.clear();
  active_ = 0;
}

bool H2Connection::flush() {
  if (!alive_) return false;
  if (!write_socket()) {
    fail_all();
    return false;
  }
  return true;
}

bool H2Connection::pump() {
  if (!alive_) return false;
  if (!read_socket() || !write_socket() ||
      (!nghttp2_session_want_read(session_.get()) && !nghttp2_session_want_write(session_.get()))) {
    fail_all();
    return false;
  }
  return true;
}

}  // namespace ic::tools::bench
