// Hostile-peer defences of the h2 layer (docs/hostile-peers.md): frame
// progress for the slowloris deadline, half-closed peers, HPACK bombs,
// PING/SETTINGS floods and zero-window peers, fed as raw client bytes.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "h2/frame_progress.hh"
#include "h2/server_session.hh"
#include "h2_harness.hh"

namespace {

using ic::h2::LimitHit;
using ic::net::PeerWait;

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  std::string_view payload) {
  std::string f;
  f += static_cast<char>(payload.size() >> 16);
  f += static_cast<char>(payload.size() >> 8);
  f += static_cast<char>(payload.size());
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>(stream >> shift);
  f += payload;
  return f;
}

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::uint8_t kHeaders = 1, kSettings = 4, kPing = 6, kContinuation = 9;
constexpr std::uint8_t kEndStream = 1, kEndHeaders = 4;
// HPACK: :method POST, :scheme http, :path / (static table 3, 6, 4),
// :authority ic (literal, name index 1).
const std::string kRequestBlock = "\x83\x86\x84\x41\x02ic";

// Counts limit hits; the rest is ignored.
struct App : ic::h2::Application {
  void on_request(ic::h2::StreamId id, std::span<const ic::h2::HeaderView>) override {
    requests[id] = "open";
  }
  void on_request_data(ic::h2::StreamId, std::span<const std::byte>) override {}
  void on_request_end(ic::h2::StreamId id) override { requests[id] = "ended"; }
  void on_stream_close(ic::h2::StreamId id, std::uint32_t code) override {
    requests[id] = "closed:" + std::to_string(code);
  }
  void on_limit_hit(LimitHit hit) override { ++hits[hit]; }
  std::map<ic::h2::StreamId, std::string> requests;
  std::map<LimitHit, int> hits;
};

struct Raw {
  explicit Raw(const ic::h2::Limits& limits = {})
      : session(conn, limits, [](ic::h2::ServerSession&) { return std::make_unique<App>(); }),
        app(static_cast<App&>(session.application())) {}
  // on_data, then one flush per turn while the session asks for another
  // (input held over its per-turn budget). False once the connection is to
  // be closed.
  bool feed(const std::string& s) {
    const bool ok = session.on_data(bytes(s));
    turns = 0;
    for (int asked = -1; asked != conn.flush_requests && turns < 10000; ++turns) {
      asked = conn.flush_requests;
      session.flush();
    }
    return ok && !conn.closed;
  }
  int turns = 0;  // flushes the last feed() took
  // GOAWAY error code in the server's output, or -1.
  long goaway_code() const {
    for (std::size_t i = 0; i + 9 <= conn.out.size();) {
      const auto* p = reinterpret_cast<const unsigned char*>(conn.out.data() + i);
      const std::size_t len = (std::size_t{p[0]} << 16) | (p[1] << 8) | p[2];
      if (p[3] == 7 && i + 9 + len <= conn.out.size()) {
        return (long{p[13]} << 24) | (p[14] << 16) | (p[15] << 8) | p[16];
      }
      i += 9 + len;
    }
    return -1;
  }
  ic::test::FakeConnection conn;
  ic::h2::ServerSession session;
  App& app;  // owned by `session`
};

}  // namespace

TEST_CASE("frame progress: preface, split frames and a header block across CONTINUATION") {
  ic::h2::FrameProgress p;
  CHECK_FALSE(p.mid_unit());
  p.feed(bytes(kPreface.substr(0, 10)));
  CHECK(p.mid_unit());
  p.feed(bytes(kPreface.substr(10)));
  CHECK_FALSE(p.mid_unit());
  CHECK(p.units() == 1);
  const std::string ping = frame(kPing, 0, 0, "12345678");
  p.feed(bytes(ping.substr(0, 4)));
  CHECK(p.mid_unit());
  p.feed(bytes(ping.substr(4)));
  CHECK_FALSE(p.mid_unit());
  CHECK(p.units() == 2);
  // A header block stays one unit until the CONTINUATION with END_HEADERS.
  p.feed(bytes(frame(kHeaders, 0, 1, "ab") + frame(kContinuation, 0, 1, "c")));
  CHECK(p.mid_unit());
  CHECK(p.units() == 2);
  p.feed(bytes(frame(kContinuation, kEndHeaders, 1, "")));
  CHECK_FALSE(p.mid_unit());
  CHECK(p.units() == 3);
}

TEST_CASE("a half-sent frame is a kHeaderBlock wait stamped at its first sample") {
  Raw r;
  CHECK(r.feed(kPreface + frame(kSettings, 0, 0, "")));
  CHECK(r.session.peer_wait(100).kind == PeerWait::kNothing);
  const std::string headers = frame(kHeaders, kEndHeaders, 1, kRequestBlock);
  CHECK(r.feed(headers.substr(0, 5)));
  CHECK(r.session.peer_wait(200).since_us == 200);
  CHECK(r.feed(headers.substr(5, 3)));  // more bytes of the same frame: no progress
  const auto w = r.session.peer_wait(300);
  CHECK(w.kind == PeerWait::kHeaderBlock);
  CHECK(w.since_us == 200);
  r.session.on_peer_deadline(w.kind);
  r.session.flush();
  CHECK(r.goaway_code() == NGHTTP2_ENHANCE_YOUR_CALM);
  CHECK(r.app.hits[LimitHit::kHeaderTimeout] == 1);
  CHECK(r.conn.closed);
}

TEST_CASE("peer FIN resets the streams whose request did not end, keeps the others") {
  Raw r;
  CHECK(r.feed(kPreface + frame(kSettings, 0, 0, "") +
               frame(kHeaders, kEndHeaders, 1, kRequestBlock) +
               frame(kHeaders, kEndHeaders | kEndStream, 3, kRequestBlock)));
  CHECK(r.app.requests[1] == "open");
  CHECK(r.app.requests[3] == "ended");
  r.session.on_peer_eof();
  r.session.flush();
  CHECK(r.app.requests[1] == "closed:8");
  CHECK(r.app.requests[3] == "ended");
  CHECK(r.app.hits[LimitHit::kHalfClosed] == 1);
  const ic::h2::HeaderView ok[] = {{":status", "200"}};
  CHECK(r.session.respond(3, ok, true));
  r.session.flush();
  CHECK(r.session.idle());
}

TEST_CASE("an HPACK bomb is cut mid-decode with GOAWAY ENHANCE_YOUR_CALM") {
  Raw r;
  // Literal with incremental indexing: "x-bomb" = 4000 × 'a', then 12000
  // references to it (index 62): 12 KB on the wire, ~48 MB decoded.
  std::string block = kRequestBlock + "\x40\x06x-bomb\x7f\xa1\x1e" + std::string(4000, 'a');
  block += std::string(12000, '\xbe');
  CHECK_FALSE(r.feed(kPreface + frame(kSettings, 0, 0, "") +
                     frame(kHeaders, kEndHeaders | kEndStream, 1, block)));
  CHECK(r.goaway_code() == NGHTTP2_ENHANCE_YOUR_CALM);
  CHECK(r.app.hits[LimitHit::kHpackExpansion] == 1);
  CHECK(r.app.requests.empty());
}

TEST_CASE("a big but honest header block is answered 431, not cut") {
  Raw r;
  // 20 000 literal bytes: over the 16 KiB list limit, but as big on the wire.
  std::string block = kRequestBlock + "\x00\x05x-big\x7f\xa1\x9b\x01" + std::string(20000, 'b');
  std::string frames = frame(kHeaders, kEndStream, 1, block.substr(0, 16384)) +
                       frame(kContinuation, kEndHeaders, 1, block.substr(16384));
  CHECK(r.feed(kPreface + frame(kSettings, 0, 0, "") + frames));
  CHECK(r.goaway_code() == -1);
  CHECK(r.app.hits.empty());
  CHECK(r.conn.out.find("431") != std::string::npos);  // :status 431 is a literal in HPACK
  CHECK(r.session.idle());
}

TEST_CASE("a PING flood past the control-frame budget gets GOAWAY ENHANCE_YOUR_CALM") {
  Raw r;
  std::string flood = kPreface + frame(kSettings, 0, 0, "");
  for (int i = 0; i < 999; ++i) flood += frame(kPing, 0, 0, "12345678");
  CHECK(r.feed(flood));  // the initial SETTINGS + 999 PINGs: within the burst of 1000
  CHECK(r.goaway_code() == -1);
  CHECK_FALSE(r.feed(frame(kPing, 0, 0, "12345678") + frame(kPing, 0, 0, "12345678")));
  CHECK(r.goaway_code() == NGHTTP2_ENHANCE_YOUR_CALM);
  CHECK(r.app.hits[LimitHit::kFlood] == 1);
}

TEST_CASE("a response the peer's zero window blocks is a kFlowControl wait") {
  Raw r;
  // SETTINGS_INITIAL_WINDOW_SIZE (4) = 0.
  CHECK(r.feed(kPreface + frame(kSettings, 0, 0, std::string("\x00\x04\x00\x00\x00\x00", 6)) +
               frame(kHeaders, kEndHeaders | kEndStream, 1, kRequestBlock)));
  const ic::h2::HeaderView ok[] = {{":status", "200"}};
  CHECK(r.session.respond(1, ok, false));
  const std::string body = "hello";
  CHECK(r.session.write(1, bytes(body)));
  r.session.flush();
  CHECK(r.conn.out.find("hello") == std::string::npos);
  auto w = r.session.peer_wait(1000);
  CHECK(w.kind == PeerWait::kFlowControl);
  CHECK(w.since_us == 1000);
  CHECK(r.session.peer_wait(5000).since_us == 1000);
  // A WINDOW_UPDATE lets the body out: no longer waiting.
  CHECK(r.feed(frame(8, 0, 1, std::string("\x00\x00\x01\x00", 4))));
  CHECK(r.conn.out.find("hello") != std::string::npos);
  CHECK(r.session.peer_wait(6000).kind == PeerWait::kNothing);
}

TEST_CASE("input over the turn's frame budget is held, reading paused, and parsed next turn") {
  ic::h2::Limits limits;
  limits.turn_input_frames = 8;
  limits.turn_input_streams = 1000;
  limits.max_concurrent_streams = 1000;
  Raw r(limits);
  // 200 requests of one 16-byte frame each after 33 bytes of preface and
  // SETTINGS. The budget is checked between 1 KiB slices, so each turn parses
  // one slice: 61 whole requests in the first, 125 by the second, 189 by the
  // third.
  std::string up = kPreface + frame(kSettings, 0, 0, "");
  for (int i = 0; i < 200; ++i) {
    up += frame(kHeaders, kEndHeaders | kEndStream, 2 * i + 1, kRequestBlock);
  }
  CHECK(r.session.on_data(bytes(up)));
  CHECK(r.app.requests.size() == 61);
  CHECK(r.conn.paused);
  CHECK_FALSE(r.session.idle());
  // This turn's flush parses nothing more and asks for the next turn.
  const int asked = r.conn.flush_requests;
  r.session.flush();
  CHECK(r.app.requests.size() == 61);
  CHECK(r.conn.flush_requests == asked + 1);
  r.session.flush();
  CHECK(r.app.requests.size() == 125);
  r.session.flush();
  CHECK(r.app.requests.size() == 189);
  CHECK(r.conn.paused);
  CHECK(r.conn.flush_requests == asked + 3);
  r.session.flush();
  CHECK(r.app.requests.size() == 200);
  CHECK_FALSE(r.conn.paused);
  CHECK(r.conn.flush_requests == asked + 3);
  CHECK(r.app.requests[399] == "ended");
}

TEST_CASE("requests over the turn's stream budget (16) wait for the next turn") {
  ic::h2::Limits limits;
  limits.max_concurrent_streams = 1000;
  Raw r(limits);
  // 104-byte requests (an 80-byte literal header) after 33 bytes of preface
  // and SETTINGS: a 1 KiB slice begins ~10 streams, so a turn takes two
  // slices (20 begun, 19 whole requests in the first turn, 39 by the second).
  std::string up = kPreface + frame(kSettings, 0, 0, "");
  const std::string pad = std::string("\x00\x05x-pad\x50", 8) + std::string(80, 'p');
  for (int i = 0; i < 100; ++i) {
    up += frame(kHeaders, kEndHeaders | kEndStream, 2 * i + 1, kRequestBlock + pad);
  }
  CHECK(r.session.on_data(bytes(up)));
  CHECK(r.app.requests.size() == 19);
  r.session.flush();  // the same turn: nothing more
  CHECK(r.app.requests.size() == 19);
  r.session.flush();
  CHECK(r.app.requests.size() == 39);
  for (int turn = 0; turn < 10 && r.conn.paused; ++turn) r.session.flush();
  CHECK(r.app.requests.size() == 100);
  CHECK(r.app.requests[199] == "ended");
}

TEST_CASE("a header-heavy flight is spread over turns by the header-byte budget") {
  Raw r;  // default budget: 16 KiB decoded per turn
  // 8 requests, each with a 12 000-byte literal header: ~96 KB decoded.
  std::string up = kPreface + frame(kSettings, 0, 0, "");
  const std::string big = std::string("\x00\x05x-big\x7f\xe1\x5c", 10) + std::string(12000, 'b');
  for (int i = 0; i < 8; ++i) {
    up += frame(kHeaders, kEndHeaders | kEndStream, 2 * i + 1, kRequestBlock + big);
  }
  CHECK(r.feed(up));
  CHECK(r.goaway_code() == -1);
  CHECK(r.app.requests.size() == 8);
  CHECK(r.turns == 4);  // 2 fields (24 KB) spend a turn: on_data's turn and three more
  CHECK(r.app.hits.empty());
  CHECK(r.session.idle() == false);  // 8 requests unanswered
}

TEST_CASE("rapid reset: resets of unanswered streams past the budget get ENHANCE_YOUR_CALM") {
  ic::h2::Limits limits;
  limits.reset_burst = 5;
  Raw r(limits);
  std::string up = kPreface + frame(kSettings, 0, 0, "");
  for (int i = 0; i < 20; ++i) {
    up += frame(kHeaders, kEndHeaders, 2 * i + 1, kRequestBlock);
    up += frame(3, 0, 2 * i + 1, std::string("\x00\x00\x00\x08", 4));  // RST_STREAM CANCEL
  }
  CHECK_FALSE(r.feed(up));
  CHECK(r.goaway_code() == NGHTTP2_ENHANCE_YOUR_CALM);
  CHECK(r.app.hits[LimitHit::kFlood] == 1);
  // Parsing stopped at the sixth reset: streams 13 onwards were never seen.
  CHECK(r.app.requests.count(13) == 0);
}
