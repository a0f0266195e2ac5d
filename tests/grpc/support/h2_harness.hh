#pragma once
// In-memory HTTP/2 test harness: a real nghttp2 CLIENT session wired to a
// server net::Session through a fake net::Connection, plus a manual clock for
// deadlines. Used by the h2, grpc and service unit tests.

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grpc/timers.hh"
#include "net/session.hh"

namespace ic::test {

// Records what the server writes and asks of its socket.
class FakeConnection final : public net::Connection {
 public:
  void send(std::span<const std::byte> bytes) override {
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ++sends;
  }
  std::size_t queued_bytes() const override { return queued; }
  void pause_reading() override { paused = true; }
  void resume_reading() override { paused = false; }
  void request_flush() override { ++flush_requests; }
  void close(bool abort) override {
    closed = true;
    aborted = abort;
  }
  unsigned core() const override { return 0; }
  std::string_view peer() const override { return "127.0.0.1:1"; }

  std::string out;         // bytes sent and not yet taken by the client
  std::size_t queued = 0;  // what queued_bytes() reports
  int sends = 0;
  int flush_requests = 0;
  bool paused = false;
  bool closed = false;
  bool aborted = false;
};

// A manual clock: timers fire only in advance().
class ManualTimers final : public grpc::Timers {
 public:
  std::int64_t now_us() const override { return now; }
  TimerId add_timer(std::int64_t delay_us, runtime::Task task) override {
    const TimerId id = ++next_id;
    pending.emplace(id, std::make_pair(now + delay_us, std::move(task)));
    return id;
  }
  void cancel_timer(TimerId id) override { pending.erase(id); }
  // Moves the clock forward and runs every timer that became due.
  void advance(std::int64_t us) {
    now += us;
    for (;;) {
      auto it = std::find_if(pending.begin(), pending.end(),
                             [&](const auto& p) { return p.second.first <= now; });
      if (it == pending.end()) break;
      runtime::Task t = std::move(it->second.second);
      pending.erase(it);
      t();
    }
  }

  std::int64_t now = 1'000'000;
  TimerId next_id = 0;
  std::map<TimerId, std::pair<std::int64_t, runtime::Task>> pending;
};

// What the client saw on one stream.
struct ClientStream {
  std::vector<std::pair<std::string, std::string>> headers;   // first header block
  std::vector<std::pair<std::string, std::string>> trailers;  // second block, if any
  std::string body;
  bool closed = false;
  std::uint32_t close_code = 0;
  bool rst_received = false;
  // request body still to send, and whether END_STREAM follows it
  std::string pending;
  bool eof = false;
  bool deferred = false;
  int header_blocks = 0;

  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return v;
    return {};
  }
  std::string trailer(std::string_view name) const {
    for (const auto& [n, v] : trailers)
      if (n == name) return v;
    return {};
  }
  // grpc-status from trailers, or from a trailers-only header block.
  std::string grpc_status() const {
    const std::string t = trailer("grpc-status");
    return t.empty() ? header("grpc-status") : t;
  }
  std::string grpc_message() const {
    const std::string t = trailer("grpc-message");
    return t.empty() ? header("grpc-message") : t;
  }
};

// An nghttp2 client session driven by hand.
class H2Client {
 public:
  H2Client() {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &on_stream_close);
    nghttp2_session_client_new(&session_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~H2Client() { nghttp2_session_del(session_); }
  H2Client(const H2Client&) = delete;
  H2Client& operator=(const H2Client&) = delete;

  // Opens a request stream. `body` is sent after the headers; with `end` the
  // request is complete, otherwise send() adds more later.
  std::int32_t request(std::vector<std::pair<std::string, std::string>> headers, std::string body,
                       bool end) {
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : headers) {
      nva.push_back({reinterpret_cast<std::uint8_t*>(n.data()),
                     reinterpret_cast<std::uint8_t*>(v.data()), n.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    nghttp2_data_provider provider{};
    provider.read_callback = &read_body;
    const bool headers_only = body.empty() && end;
    const std::int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                                   headers_only ? nullptr : &provider, nullptr);
    auto& s = streams[id];
    s.pending = std::move(body);
    s.eof = end;
    return id;
  }

  // A gRPC POST with the standard headers plus `extra`.
  std::int32_t grpc_call(std::string path, std::string body, bool end = true,
                         std::vector<std::pair<std::string, std::string>> extra = {}) {
    std::vector<std::pair<std::string, std::string>> h = {{":method", "POST"},
                                                          {":scheme", "http"},
                                                          {":authority", "localhost"},
                                                          {":path", std::move(path)},
                                                          {"content-type", "application/grpc"},
                                                          {"te", "trailers"}};
    for (auto& e : extra) h.push_back(std::move(e));
    return request(std::move(h), std::move(body), end);
  }

  // Adds request body bytes (and END_STREAM with `end`).
  void send(std::int32_t id, std::string_view bytes, bool end) {
    auto& s = streams[id];
    s.pending.append(bytes);
    s.eof = end;
    if (s.deferred) {
      s.deferred = false;
      nghttp2_session_resume_data(session_, id);
    }
  }

  void cancel(std::int32_t id) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }

  // Client output bytes (the next mem_send chunks).
  std::string take_output() {
    std::string out;
    for (;;) {
      const std::uint8_t* p = nullptr;
      const auto n = nghttp2_session_mem_send(session_, &p);
      if (n <= 0) break;
      out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    }
    return out;
  }
  // Feeds server bytes; returns nghttp2's result (< 0 = connection error).
  long receive(std::string_view bytes) {
    return static_cast<long>(nghttp2_session_mem_recv(
        session_, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  }

  nghttp2_session* raw() { return session_; }

  std::map<std::int32_t, ClientStream> streams;
  bool goaway_received = false;
  std::int32_t goaway_last_stream = -1;
  std::uint32_t goaway_error = 0;
  std::uint32_t server_max_concurrent = 0;

 private:
  static H2Client& self(void* u) { return *static_cast<H2Client*>(u); }
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t, void* u) {
    auto& s = self(u).streams[frame->hd.stream_id];
    std::pair<std::string, std::string> f(
        std::string(reinterpret_cast<const char*>(name), namelen),
        std::string(reinterpret_cast<const char*>(value), valuelen));
    if (frame->headers.cat == NGHTTP2_HCAT_HEADERS) {
      s.trailers.push_back(std::move(f));
    } else {
      s.headers.push_back(std::move(f));
    }
    return 0;
  }
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* u) {
    auto& c = self(u);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      c.goaway_received = true;
      c.goaway_last_stream = frame->goaway.last_stream_id;
      c.goaway_error = frame->goaway.error_code;
    } else if (frame->hd.type == NGHTTP2_RST_STREAM) {
      c.streams[frame->hd.stream_id].rst_received = true;
    } else if (frame->hd.type == NGHTTP2_HEADERS) {
      ++c.streams[frame->hd.stream_id].header_blocks;
    } else if (frame->hd.type == NGHTTP2_SETTINGS && (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
      for (std::size_t i = 0; i < frame->settings.niv; ++i) {
        if (frame->settings.iv[i].settings_id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
          c.server_max_concurrent = frame->settings.iv[i].value;
      }
    }
    return 0;
  }
  static int on_data_chunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* d,
                           std::size_t len, void* u) {
    self(u).streams[id].body.append(reinterpret_cast<const char*>(d), len);
    return 0;
  }
  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* u) {
    auto& s = self(u).streams[id];
    s.closed = true;
    s.close_code = code;
    return 0;
  }
  static ssize_t read_body(nghttp2_session*, std::int32_t id, std::uint8_t* buf, std::size_t len,
                           std::uint32_t* flags, nghttp2_data_source*, void* u) {
    auto& s = self(u).streams[id];
    const std::size_t n = std::min(len, s.pending.size());
    std::memcpy(buf, s.pending.data(), n);
    s.pending.erase(0, n);
    if (s.pending.empty() && s.eof) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    } else if (n == 0) {
      s.deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  nghttp2_session* session_ = nullptr;
};

// Moves bytes both ways until neither side has anything more to say.
// Returns false if the server asked to close the connection (on_data false).
inline bool pump(H2Client& client, net::Session& server, FakeConnection& conn,
                 std::size_t chunk = 0) {
  bool open = true;
  for (int round = 0; round < 10000; ++round) {
    const std::string up = client.take_output();
    if (!up.empty() && open) {
      const auto* p = reinterpret_cast<const std::byte*>(up.data());
      if (chunk == 0) {
        open = server.on_data(std::span(p, up.size()));
      } else {
        for (std::size_t off = 0; off < up.size() && open; off += chunk) {
          open = server.on_data(std::span(p + off, std::min(chunk, up.size() - off)));
        }
      }
    }
    server.flush();
    std::string down;
    down.swap(conn.out);
    if (!down.empty()) client.receive(down);
    if (up.empty() && down.empty()) break;
  }
  return open;
}

// gRPC message framing for test requests: 1 flag byte, 4 length bytes (BE).
inline std::string frame(std::string_view message, std::uint8_t flag = 0) {
  std::string out;
  out.push_back(static_cast<char>(flag));
  const auto n = static_cast<std::uint32_t>(message.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.append(message);
  return out;
}

// Splits a gRPC response body into its messages (assumes well-formed input).
inline std::vector<std::string> unframe(std::string_view body) {
  std::vector<std::string> out;
  while (body.size() >= 5) {
    const std::uint32_t n = (static_cast<std::uint32_t>(static_cast<std::uint8_t>(body[1])) << 24) |
                            (static_cast<std::uint32_t>(static_cast<std::uint8_t>(body[2])) << 16) |
                            (static_cast<std::uint32_t>(static_cast<std::uint8_t>(body[3])) << 8) |
                            static_cast<std::uint32_t>(static_cast<std::uint8_t>(body[4]));
    out.emplace_back(body.substr(5, n));
    body.remove_prefix(5 + n);
  }
  return out;
}

}  // namespace ic::test
