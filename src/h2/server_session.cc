#include "h2/server_session.hh"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>

#include "base/check.hh"
#include "h2/callbacks.hh"
#include "h2/session_stream.hh"

namespace ic::h2 {

namespace {

// Bytes per mem_recv call. The budget is checked between slices: nghttp2
// cannot be paused inside the small control frames, so a turn overshoots by
// at most one slice (~110 empty frames, a few µs).
constexpr std::size_t kSliceBytes = 1024;

// HTTP/2 frame header (RFC 9113 §4.1).
constexpr std::size_t kFrameHeaderBytes = 9;
// A spare output buffer bigger than this is released rather than kept.
constexpr std::size_t kKeepOutputBytes = 256 * 1024;
// Finished streams kept per connection for reuse, and the largest body
// buffer a kept stream may hold.
constexpr std::size_t kSpareStreams = 16;
constexpr std::size_t kKeepStreamBytes = 64 * 1024;

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

ServerSession::Stream::~Stream() { release_headers(); }

void ServerSession::Stream::reuse_as(StreamId next) {
  release_headers();
  auto header_buf = std::move(headers);
  std::string in_buf = std::move(in);
  ResponseBytes out_buf = std::move(out);
  std::vector<Header> trailer_buf = std::move(trailers);
  *this = Stream(next);
  headers = std::move(header_buf);
  in = std::move(in_buf);
  out = std::move(out_buf);
  trailers = std::move(trailer_buf);
  in.clear();
  out.clear();
  trailers.clear();
}

void ServerSession::Stream::release_headers() {
  for (auto& [name, value] : headers) {
    nghttp2_rcbuf_decref(name);
    nghttp2_rcbuf_decref(value);
  }
  headers.clear();
}

// nghttp2 callback trampolines. They only record state (docs/architecture.md rule 3).
struct ServerSession::Callbacks {
  static ServerSession& self(void* user) { return *static_cast<ServerSession*>(user); }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (!is_request_headers(frame)) return 0;
    auto& s = self(user);
    ++s.turn_streams_;
    const auto [it, added] =
        s.streams_.emplace(frame->hd.stream_id, s.new_stream(frame->hd.stream_id));
    if (added) s.recent_[recent_slot(it->first)] = it->second.get();
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
        (frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 && !s.control_tokens_.take()) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;  // flood: ended in on_data
    }
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      // Rapid reset: a stream reset before we answered it cost us its
      // request for nothing. Stopped here, before nghttp2 parses further.
      const Stream* st = s.find(frame->hd.stream_id);
      if (st != nullptr && !st->responded && !s.reset_tokens_.take()) {
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

  // Data source for response bodies. The bytes are not copied here
  // (NGHTTP2_DATA_FLAG_NO_COPY): send_body writes them, behind the frame
  // header, straight into the turn's output. Submitting the trailers from here
  // is the documented nghttp2 pattern (nghttp2_submit_trailer doc).
  static ssize_t read_body(nghttp2_session* session, std::int32_t stream_id, std::uint8_t*,
                           std::size_t length, std::uint32_t* data_flags, nghttp2_data_source*,
                           void* user) {
    auto& s = self(user);
    Stream* st = s.find(stream_id);
    if (st == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (st->trailers_submitted) return NGHTTP2_ERR_DEFERRED;  // finish_now() ended it
    const std::size_t n = std::min(length, st->out.size() - st->out_off);
    *data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->out_off + n < st->out.size()) return static_cast<ssize_t>(n);
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

  // The DATA frame read_body sized: its 9-byte header, then `length` body
  // bytes from the stream's buffer, appended to the output of this pump
  // (nghttp2_send_data_callback; mem_send calls it in order with the chunks
  // it returns, so the frames stay in sequence).
  static int send_body(nghttp2_session*, nghttp2_frame* frame, const std::uint8_t* framehd,
                       std::size_t length, nghttp2_data_source*, void* user) {
    auto& s = self(user);
    Stream* st = s.find(frame->hd.stream_id);
    if (st == nullptr || st->out.size() - st->out_off < length) {
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    const auto* hd = reinterpret_cast<const std::byte*>(framehd);
    s.out_.insert(s.out_.end(), hd, hd + kFrameHeaderBytes);
    // We never ask for padding (no select_padding callback), but honour it.
    const std::size_t padlen = frame->data.padlen;
    if (padlen > 0) s.out_.push_back(static_cast<std::byte>(padlen - 1));
    const auto* body = reinterpret_cast<const std::byte*>(st->out.data()) + st->out_off;
    s.out_.insert(s.out_.end(), body, body + length);
    if (padlen > 1) s.out_.insert(s.out_.end(), padlen - 1, std::byte{0});
    st->out_off += length;
    if (st->out_off == st->out.size()) {
      st->out.clear();
      st->out_off = 0;
    }
    return 0;
  }

  // Built once: sessions copy the callback table at creation.
  static const nghttp2_session_callbacks* table() {
    static const CallbacksPtr callbacks = make_callbacks({
        .on_begin_frame = &on_begin_frame,
        .on_begin_headers = &on_begin_headers,
        .on_header2 = &on_header,
        .on_frame_recv = &on_frame_recv,
        .on_data_chunk_recv = &on_data_chunk,
        .on_stream_close = &on_stream_close,
        .on_frame_send = &on_frame_send,
        .send_data = &send_body,
    });
    return callbacks.get();
  }
};

ServerSession::ServerSession(net::Connection& connection, const Limits& limits,
                             const ApplicationFactory& make_app)
    : conn_(connection),
      limits_(limits),
      control_tokens_(static_cast<double>(limits.control_frame_burst),
                      static_cast<double>(limits.control_frame_rate_per_s)),
      reset_tokens_(static_cast<double>(limits.reset_burst),
                    static_cast<double>(limits.reset_rate_per_s)) {
  // Each call fails only on allocation failure or an argument out of the
  // range nghttp2 documents (nghttp2.h): neither leaves a session worth serving.
  nghttp2_option* option = nullptr;
  const int optioned = nghttp2_option_new(&option);
  IC_CHECK(optioned == 0, "nghttp2_option_new");
  nghttp2_option_set_stream_reset_rate_limit(option, limits_.reset_burst, limits_.reset_rate_per_s);
  nghttp2_option_set_max_continuations(option, limits_.max_continuations);
  const int created = nghttp2_session_server_new2(&session_, Callbacks::table(), this, option);
  nghttp2_option_del(option);
  IC_CHECK(created == 0, "nghttp2_session_server_new2");

  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_bytes},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.initial_window_bytes},
  };
  const int submitted =
      nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  IC_CHECK(submitted == 0, "nghttp2_submit_settings (a limit outside RFC 9113 §6.5.2's ranges)");
  // The connection window starts at 64 KiB whatever SETTINGS say (RFC 9113
  // §6.9.2); widen it so concurrent uploads are not serialised on it.
  const int widened = nghttp2_session_set_local_window_size(
      session_, NGHTTP2_FLAG_NONE, 0, static_cast<std::int32_t>(limits_.initial_window_bytes));
  IC_CHECK(widened == 0, "nghttp2_session_set_local_window_size");
  app_ = make_app(*this);
}

ServerSession::~ServerSession() {
  closed_ = true;
  app_.reset();  // its calls may still look their streams up
  recent_.fill(nullptr);
  streams_.clear();  // release header buffers before their session goes
  nghttp2_session_del(session_);
}

ServerSession::Stream* ServerSession::find(StreamId id) {
  // nghttp2 calls back for one stream several times (each header field, the
  // frames, the body source, the close): most find it in its slot.
  Stream*& slot = recent_[recent_slot(id)];
  if (slot != nullptr && slot->id == id) return slot;
  const auto it = streams_.find(id);
  if (it == streams_.end()) return nullptr;
  slot = it->second.get();
  return slot;
}

void ServerSession::erase(StreamId id) {
  Stream*& slot = recent_[recent_slot(id)];
  if (slot != nullptr && slot->id == id) slot = nullptr;
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  std::unique_ptr<Stream> st = std::move(it->second);
  streams_.erase(it);
  // Kept for the next stream unless the pool is full or its buffers grew
  // past what a typical call needs (a large upload's buffer is not held).
  if (spare_streams_.size() < kSpareStreams && st->in.capacity() <= kKeepStreamBytes &&
      st->out.capacity() <= kKeepStreamBytes) {
    st->release_headers();
    spare_streams_.push_back(std::move(st));
  }
}

std::unique_ptr<ServerSession::Stream> ServerSession::new_stream(StreamId id) {
  if (spare_streams_.empty()) return std::make_unique<Stream>(id);
  std::unique_ptr<Stream> st = std::move(spare_streams_.back());
  spare_streams_.pop_back();
  st->reuse_as(id);
  return st;
}

void ServerSession::mark_dirty(Stream& s) {
  if (s.dirty) return;
  s.dirty = true;
  dirty_.push_back(s.id);
}

bool ServerSession::on_data(std::span<const std::byte> data) {
  if (closed_) return false;
  const Entry entry(*this);
  bool ok = true;
  if (held_in_.empty()) {
    const std::ptrdiff_t used = receive(data);
    ok = used >= 0;
    if (ok && static_cast<std::size_t>(used) < data.size()) {
      held_in_.assign(data.begin() + used, data.end());
      held_off_ = 0;
      apply_backpressure();  // pauses reading: the held bytes come first
    }
  } else {
    // Reading is paused while input is held, but a layer below (TLS) may
    // still hand over what it had already decrypted: keep the order.
    held_in_.insert(held_in_.end(), data.begin(), data.end());
    ok = receive_held();
  }
  if (!ok) {
    fail_input();
    out_.clear();
    pump_output();
    conn_.send_buffer(out_);
    return false;
  }
  dispatch();
  return true;
}

std::ptrdiff_t ServerSession::receive(std::span<const std::byte> data) {
  std::size_t used = 0;
  while (used < data.size() && !input_budget_spent()) {
    const auto slice = data.subspan(used, std::min(kSliceBytes, data.size() - used));
    progress_.feed(slice);
    in_nghttp2_ = true;
    const auto rv = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const std::uint8_t*>(slice.data()), slice.size());
    in_nghttp2_ = false;
    if (rv < 0) {
      recv_error_ = rv;
      return -1;
    }
    // nghttp2 consumes a whole slice: no callback of ours returns PAUSE.
    used += slice.size();
    turn_bytes_ += slice.size();
  }
  return static_cast<std::ptrdiff_t>(used);
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
    const auto* bytes = reinterpret_cast<const std::byte*>(chunk);
    out_.insert(out_.end(), bytes, bytes + n);
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
  // The turn's frames, built in one buffer, become the connection's output
  // (no copy when its queue is empty); a large spare is not kept.
  conn_.send_buffer(out_);
  if (out_.capacity() > kKeepOutputBytes) out_.shrink_to_fit();
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

bool ServerSession::idle() const { return streams_.empty() && held_in_.empty(); }

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

bool ServerSession::write_buffer(StreamId id, ResponseBytes& bytes) {
  Stream* st = find(id);
  if (st == nullptr || !st->responded || st->body_done || st->closed) return false;
  if (st->out.empty()) {
    st->out.swap(bytes);  // `bytes` gets the stream's empty buffer
    st->out_off = 0;
  } else {
    st->out.append(bytes);
  }
  bytes.clear();
  if (st->deferred) {
    st->deferred = false;
    nghttp2_session_resume_data(session_, id);
  }
  wake();
  return true;
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

bool ServerSession::finish_now(StreamId id, std::span<const HeaderView> trailers) {
  Stream* st = find(id);
  if (st == nullptr || !st->responded || st->body_done || st->closed || closed_ || trailers.empty())
    return false;
  st->body_done = true;
  st->trailers_submitted = true;  // read_body sends nothing more
  st->trailers.clear();
  ResponseBytes().swap(st->out);  // what the client did not take: freed now
  st->out_off = 0;
  const NvList nva(trailers);
  if (nghttp2_submit_trailer(session_, id, nva.data(), nva.size()) != 0) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
  }
  wake();
  return true;
}

void ServerSession::wake() {
  if (entry_depth_ == 0) conn_.request_flush();
}

}  // namespace ic::h2
