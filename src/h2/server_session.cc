#include "h2/server_session.hh"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

namespace ic::h2 {

// Per-stream state. Request side is filled by the nghttp2 callbacks and
// drained by dispatch(); response side is filled by respond/write/finish and
// drained by the data source read callback.
struct ServerSession::Stream {
  explicit Stream(StreamId stream_id) : id(stream_id) {}
  ~Stream() { release_headers(); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Drops our references on the header buffers.
  void release_headers() {
    for (auto& [name, value] : headers) {
      nghttp2_rcbuf_decref(name);
      nghttp2_rcbuf_decref(value);
    }
    headers.clear();
  }
  StreamId id;
  // request: header fields stay in nghttp2's ref-counted buffers (no copy);
  // HPACK static-table names are static buffers.
  std::vector<std::pair<nghttp2_rcbuf*, nghttp2_rcbuf*>> headers;
  std::size_t header_bytes = 0;
  std::string in;  // body bytes received since the last dispatch
  bool headers_done = false;
  bool headers_too_large = false;
  bool end_received = false;
  bool closed = false;
  std::uint32_t close_code = 0;
  // delivery to the application
  bool dirty = false;
  bool delivered_request = false;
  bool delivered_end = false;
  bool rejected = false;  // answered by this layer (431); the app never sees it
  // response
  bool responded = false;
  bool body_done = false;
  bool deferred = false;
  std::string out;
  std::size_t out_off = 0;
  std::vector<Header> trailers;
};

namespace {

// nghttp2 name/value pairs pointing into `fields` (nghttp2 copies them):
// up to kInline fields without touching the heap.
class NvList {
 public:
  template <typename Field>
  explicit NvList(std::span<const Field> fields) {
    nghttp2_nv* out = inline_;
    if (fields.size() > kInline) {
      heap_.resize(fields.size());
      out = heap_.data();
    }
    for (const auto& f : fields) {
      *out++ = {reinterpret_cast<std::uint8_t*>(const_cast<char*>(f.name.data())),
                reinterpret_cast<std::uint8_t*>(const_cast<char*>(f.value.data())), f.name.size(),
                f.value.size(), NGHTTP2_NV_FLAG_NONE};
    }
    size_ = fields.size();
  }
  const nghttp2_nv* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::size_t kInline = 8;
  nghttp2_nv inline_[kInline];
  std::vector<nghttp2_nv> heap_;
  std::size_t size_ = 0;
};

std::string_view view(nghttp2_rcbuf* buf) {
  const nghttp2_vec v = nghttp2_rcbuf_get_buf(buf);
  return {reinterpret_cast<const char*>(v.base), v.len};
}

bool is_request_headers(const nghttp2_frame* frame) {
  return frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST;
}

}  // namespace

// nghttp2 callback trampolines. They only record state (docs/architecture.md rule 3).
struct ServerSession::Callbacks {
  static ServerSession& self(void* user) { return *static_cast<ServerSession*>(user); }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (!is_request_headers(frame)) return 0;
    auto& s = self(user);
    ++s.turn_streams_;
    s.streams_.emplace(frame->hd.stream_id, std::make_unique<Stream>(frame->hd.stream_id));
    return 0;
  }

  // Counts the turn's frames; starts the decoded count of a header block
  // (HPACK expansion check).
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user) {
    auto& s = self(user);
    ++s.turn_frames_;
    if (hd->type == NGHTTP2_HEADERS) s.block_decoded_bytes_ = 0;
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, nghttp2_rcbuf* name,
                       nghttp2_rcbuf* value, std::uint8_t, void* user) {
    auto& s = self(user);
    // RFC 9113 §6.5.2: the size of a field is name + value + 32 octets.
    const std::size_t field =
        nghttp2_rcbuf_get_buf(name).len + nghttp2_rcbuf_get_buf(value).len + 32;
    s.turn_header_bytes_ += field;
    // An HPACK bomb stops here: nghttp2 validates every decoded value, so
    // only ending mem_recv bounds its cost.
    if (!s.count_decoded(field)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (!is_request_headers(frame)) return 0;  // request trailers carry nothing we use
    Stream* st = s.find(frame->hd.stream_id);
    if (st == nullptr || st->headers_too_large) return 0;
    st->header_bytes += field;
    if (st->header_bytes > s.limits_.max_header_list_bytes) {
      st->headers_too_large = true;
      st->release_headers();
      return 0;
    }
    nghttp2_rcbuf_incref(name);
    nghttp2_rcbuf_incref(value);
    st->headers.emplace_back(name, value);
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto& s = self(user);
    if ((frame->hd.type == NGHTTP2_PING || frame->hd.type == NGHTTP2_SETTINGS) &&
        (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 && !s.take_control_token()) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;  // flood: ended in on_data
    }
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      // Rapid reset: a stream reset before we answered it cost us its
      // request for nothing. Stopped here, before nghttp2 parses further.
      const Stream* st = s.find(frame->hd.stream_id);
      if (st != nullptr && !st->responded && !s.take_reset_token()) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
      }
      return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    Stream* st = s.find(frame->hd.stream_id);
    if (st == nullptr) return 0;
    if (is_request_headers(frame)) st->headers_done = true;
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) st->end_received = true;
    s.mark_dirty(*st);
    return 0;
  }

  static int on_data_chunk(nghttp2_session*, std::uint8_t, std::int32_t stream_id,
                           const std::uint8_t* data, std::size_t len, void* user) {
    auto& s = self(user);
    Stream* st = s.find(stream_id);
    if (st == nullptr || st->rejected) return 0;
    st->in.append(reinterpret_cast<const char*>(data), len);
    s.mark_dirty(*st);
    return 0;
  }

  static int on_stream_close(nghttp2_session*, std::int32_t stream_id, std::uint32_t error_code,
                             void* user) {
    auto& s = self(user);
    Stream* st = s.find(stream_id);
    if (st == nullptr) return 0;
    st->closed = true;
    st->close_code = error_code;
    s.mark_dirty(*st);
    return 0;
  }

  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      // nghttp2's own flood guards (RST_STREAM rate) end the connection with
      // GOAWAY; ours set calm_ first.
      auto& s = self(user);
      const std::uint32_t code = frame->goaway.error_code;
      if (!s.calm_ && (code == NGHTTP2_ENHANCE_YOUR_CALM || code == NGHTTP2_INTERNAL_ERROR)) {
        s.calm_ = true;
        s.app_->on_limit_hit(LimitHit::kFlood);
      }
      return 0;
    }
    // Our response ended while the client is still sending: RFC 9113 §8.1
    // lets us reset with NO_ERROR so it stops. Done after mem_send returns.
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    auto& s = self(user);
    Stream* st = s.find(frame->hd.stream_id);
    if (st != nullptr && !st->end_received) s.rst_after_end_.push_back(st->id);
    return 0;
  }

  // Data source for response bodies. Submitting the trailers from here is the
  // documented nghttp2 pattern (nghttp2_submit_trailer doc).
  static ssize_t read_body(nghttp2_session* session, std::int32_t stream_id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* data_flags, nghttp2_data_source*,
                           void* user) {
    auto& s = self(user);
    Stream* st = s.find(stream_id);
    if (st == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::size_t n = std::min(length, st->out.size() - st->out_off);
    std::memcpy(buf, st->out.data() + st->out_off, n);
    st->out_off += n;
    if (st->out_off < st->out.size()) return static_cast<ssize_t>(n);
    st->out.clear();
    st->out_off = 0;
    if (st->body_done) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!st->trailers.empty()) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        const NvList nva(std::span<const Header>(st->trailers));
        if (nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size()) != 0) {
          return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
      }
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      st->deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }

  // Built once: sessions copy the callback table at creation.
  static const nghttp2_session_callbacks* table() {
    static nghttp2_session_callbacks* cbs = [] {
      nghttp2_session_callbacks* c = nullptr;
      nghttp2_session_callbacks_new(&c);
      nghttp2_session_callbacks_set_on_begin_frame_callback(c, &on_begin_frame);
      nghttp2_session_callbacks_set_on_begin_headers_callback(c, &on_begin_headers);
      nghttp2_session_callbacks_set_on_header_callback2(c, &on_header);
      nghttp2_session_callbacks_set_on_frame_recv_callback(c, &on_frame_recv);
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, &on_data_chunk);
      nghttp2_session_callbacks_set_on_stream_close_callback(c, &on_stream_close);
      nghttp2_session_callbacks_set_on_frame_send_callback(c, &on_frame_send);
      return c;
    }();
    return cbs;
  }
};

ServerSession::ServerSession(net::Connection& connection, const Limits& limits,
                             const ApplicationFactory& make_app)
    : conn_(connection),
      limits_(limits),
      control_tokens_(static_cast<double>(limits.control_frame_burst)),
      reset_tokens_(static_cast<double>(limits.reset_burst)) {
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  nghttp2_option_set_stream_reset_rate_limit(option, limits_.reset_burst, limits_.reset_rate_per_s);
  nghttp2_option_set_max_continuations(option, limits_.max_continuations);
  nghttp2_session_server_new2(&session_, Callbacks::table(), this, option);
  nghttp2_option_del(option);

  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_bytes},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.initial_window_bytes},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  // The connection window starts at 64 KiB whatever SETTINGS say (RFC 9113
  // §6.9.2); widen it so concurrent uploads are not serialised on it.
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<std::int32_t>(limits_.initial_window_bytes));
  app_ = make_app(*this);
}

ServerSession::~ServerSession() {
  closed_ = true;
  app_.reset();      // its calls may still look their streams up
  streams_.clear();  // release header buffers before their session goes
  nghttp2_session_del(session_);
}

ServerSession::Stream* ServerSession::find(StreamId id) {
  // nghttp2 calls back for one stream several times in a row (each header
  // field, then the frame): remember the last hit.
  if (last_found_ != nullptr && last_found_->id == id) return last_found_;
  const auto it = streams_.find(id);
  if (it == streams_.end()) return nullptr;
  last_found_ = it->second.get();
  return last_found_;
}

void ServerSession::erase(StreamId id) {
  if (last_found_ != nullptr && last_found_->id == id) last_found_ = nullptr;
  streams_.erase(id);
}

void ServerSession::mark_dirty(Stream& s) {
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(s.id);
}

bool ServerSession::dispatch() {
  bool any = false;
  if (!rst_after_end_.empty()) {
    std::vector<StreamId> ids;
    ids.swap(rst_after_end_);
    for (const StreamId id : ids) {
      Stream* st = find(id);
      if (st != nullptr && !st->closed && !st->end_received) {
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
        any = true;
      }
    }
  }
  std::vector<StreamId>& ids = dispatch_ids_;
  std::string& body = dispatch_body_;
  while (!dirty_.empty()) {
    ids.clear();
    ids.swap(dirty_);
    for (const StreamId id : ids) {
      Stream* st = find(id);
      if (st == nullptr) continue;
      st->dirty = false;
      any = true;
      // A stream the client reset before we got to it (rapid reset) costs
      // the application nothing.
      if (st->headers_done && !st->delivered_request && !st->rejected && !st->closed) {
        if (st->headers_too_large) {
          st->rejected = true;
          st->in.clear();
          const HeaderView h431[] = {{":status", "431"}};
          respond(id, h431, true);
          if (++rejected_blocks_ > limits_.max_rejected_header_blocks) {
            calm_down(LimitHit::kRejectedHeaders);
          }
        } else {
          st->delivered_request = true;
          header_views_.clear();
          for (const auto& [name, value] : st->headers) {
            header_views_.push_back({view(name), view(value)});
          }
          app_->on_request(id, header_views_);
          header_views_.clear();
          st->release_headers();
        }
      }
      if (st->delivered_request && !st->in.empty()) {
        body.swap(st->in);
        app_->on_request_data(id, std::as_bytes(std::span(body.data(), body.size())));
        body.clear();
      }
      if (st->delivered_request && st->end_received && !st->delivered_end) {
        st->delivered_end = true;
        app_->on_request_end(id);
      }
      if (st->closed) {
        if (st->delivered_request) app_->on_stream_close(id, st->close_code);
        erase(id);
      }
    }
  }
  return any;
}

void ServerSession::pump_output() {
  for (;;) {
    const std::uint8_t* chunk = nullptr;
    in_nghttp2_ = true;
    const auto n = nghttp2_session_mem_send(session_, &chunk);
    in_nghttp2_ = false;
    if (n <= 0) {
      if (n < 0) conn_.close(true);  // only on out-of-memory inside nghttp2
      return;
    }
    // The chunk is valid only until the next mem_send: copy it (rule 4).
    out_.append(reinterpret_cast<const char*>(chunk), static_cast<std::size_t>(n));
  }
}

void ServerSession::flush() {
  if (closed_ || in_nghttp2_) return;
  const Entry entry(*this);
  const bool input_ok = resume_input();
  out_.clear();
  do {
    dispatch();
    pump_output();
  } while (!dirty_.empty() || !rst_after_end_.empty());
  if (!out_.empty()) conn_.send(std::as_bytes(std::span(out_.data(), out_.size())));
  if (!input_ok ||
      (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0)) {
    // Protocol error GOAWAY sent, or a graceful GOAWAY with no stream left.
    conn_.close();
    return;
  }
  apply_backpressure();
  end_input_turn();
}

void ServerSession::apply_backpressure() {
  const std::size_t queued = conn_.queued_bytes();
  if (queued > limits_.output_queue_cap_bytes) {
    output_full_ = true;
  } else if (queued <= limits_.output_queue_cap_bytes / 2) {
    output_full_ = false;
  }
  // Input held for the next turn keeps reading paused too (its order).
  const bool pause = output_full_ || !held_in_.empty();
  if (pause == paused_) return;
  paused_ = pause;
  if (pause) {
    conn_.pause_reading();
  } else {
    conn_.resume_reading();
  }
}

void ServerSession::on_shutdown() {
  if (closed_ || shutting_down_) return;
  const Entry entry(*this);
  shutting_down_ = true;
  // Streams up to the last one we processed finish; newer ones are refused and
  // safe for the client to retry (RFC 9113 §6.8).
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  app_->on_shutdown();
  conn_.request_flush();
}

bool ServerSession::idle() const { return streams_.empty() && held_in_.empty(); }

void ServerSession::on_peer_eof() {
  if (closed_) return;
  const Entry entry(*this);
  bool any = false;
  for (const auto& [id, st] : streams_) {
    if (st->end_received || st->closed) continue;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    any = true;
  }
  if (any) app_->on_limit_hit(LimitHit::kHalfClosed);
  conn_.request_flush();
}

bool ServerSession::window_blocked() const {
  const bool conn_blocked = nghttp2_session_get_remote_window_size(session_) <= 0;
  for (const auto& [id, st] : streams_) {
    if (!st->responded || st->closed || st->out_off >= st->out.size()) continue;
    if (conn_blocked || nghttp2_session_get_stream_remote_window_size(session_, id) <= 0) {
      return true;
    }
  }
  return false;
}

void ServerSession::on_close() {
  if (closed_) return;
  const Entry entry(*this);
  closed_ = true;
  for (auto& [id, st] : streams_) {
    if (st->delivered_request) app_->on_stream_close(id, NGHTTP2_CANCEL);
  }
  last_found_ = nullptr;
  streams_.clear();
  dirty_.clear();
  held_in_.clear();
}

bool ServerSession::respond(StreamId id, std::span<const HeaderView> headers, bool end_stream) {
  Stream* st = find(id);
  if (st == nullptr || st->responded || st->closed || closed_) return false;
  const NvList nva(headers);
  int rv = 0;
  if (end_stream) {
    rv = nghttp2_submit_response(session_, id, nva.data(), nva.size(), nullptr);
  } else {
    nghttp2_data_provider provider{};
    provider.read_callback = &Callbacks::read_body;
    rv = nghttp2_submit_response(session_, id, nva.data(), nva.size(), &provider);
  }
  if (rv != 0) return false;
  st->responded = true;
  st->body_done = end_stream;
  wake();
  return true;
}

bool ServerSession::write(StreamId id, std::span<const std::byte> bytes) {
  Stream* st = find(id);
  if (st == nullptr || !st->responded || st->body_done || st->closed) return false;
  st->out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(session_, id);
  }
  wake();
  return true;
}

std::size_t ServerSession::unsent_bytes(StreamId id) {
  const Stream* st = find(id);
  return st == nullptr ? 0 : st->out.size() - st->out_off;
}

bool ServerSession::finish(StreamId id, std::span<const HeaderView> trailers) {
  Stream* st = find(id);
  if (st == nullptr || !st->responded || st->body_done || st->closed) return false;
  st->body_done = true;
  st->trailers.clear();
  for (const auto& t : trailers)
    st->trailers.push_back({std::string(t.name), std::string(t.value)});
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(session_, id);
  }
  wake();
  return true;
}

void ServerSession::reset(StreamId id, std::uint32_t error_code) {
  Stream* st = find(id);
  if (st == nullptr || st->closed || closed_) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, error_code);
  wake();
}

void ServerSession::wake() {
  if (entry_depth_ == 0) conn_.request_flush();
}

}  // namespace ic::h2
