#include "h2/server_session.hh"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "h2_harness.hh"

namespace {

using ic::h2::HeaderView;
using ic::h2::ResponseBytes;
using ic::h2::StreamId;

// Records what the session hands up; answers nothing by itself.
struct RecordingApp : ic::h2::Application {
  void on_request(StreamId id, std::span<const HeaderView> headers) override {
    auto& r = requests[id];
    for (const auto& h : headers) r.headers[std::string(h.name)] = std::string(h.value);
    order.push_back("request:" + std::to_string(id));
  }
  void on_request_data(StreamId id, std::span<const std::byte> data) override {
    requests[id].body.append(reinterpret_cast<const char*>(data.data()), data.size());
  }
  void on_request_end(StreamId id) override {
    requests[id].ended = true;
    order.push_back("end:" + std::to_string(id));
  }
  void on_stream_close(StreamId id, std::uint32_t code) override {
    requests[id].closed = true;
    requests[id].close_code = code;
    order.push_back("close:" + std::to_string(id));
  }
  struct Request {
    std::map<std::string, std::string> headers;
    std::string body;
    bool ended = false;
    bool closed = false;
    std::uint32_t close_code = 0;
  };
  std::map<StreamId, Request> requests;
  std::vector<std::string> order;
};

// The session owns its application; the tests look at it through `app`.
ic::h2::ApplicationFactory recording_app() {
  return [](ic::h2::ServerSession&) { return std::make_unique<RecordingApp>(); };
}

RecordingApp& app_of(ic::h2::ServerSession& session) {
  return static_cast<RecordingApp&>(session.application());
}

struct Fixture {
  explicit Fixture(ic::h2::Limits l = {})
      : limits(l), session(conn, limits, recording_app()), app(app_of(session)) {}
  bool run() { return ic::test::pump(client, session, conn); }
  std::int32_t get(const std::string& path, std::string body = "", bool end = true) {
    return client.request(
        {{":method", "POST"}, {":scheme", "http"}, {":authority", "localhost"}, {":path", path}},
        std::move(body), end);
  }
  ic::h2::Limits limits;
  ic::test::FakeConnection conn;
  ic::h2::ServerSession session;
  RecordingApp& app;
  ic::test::H2Client client;
};

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

ic::h2::Limits small_limits() {
  ic::h2::Limits l;
  l.max_concurrent_streams = 7;
  l.max_header_list_bytes = 200;
  return l;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "request headers, body and end reach the application in order") {
  const auto id = get("/a", "hello", false);
  run();
  client.send(id, " world", true);
  run();
  const auto& r = app.requests[id];
  CHECK(r.headers.at(":path") == "/a");
  CHECK(r.headers.at(":method") == "POST");
  CHECK(r.body == "hello world");
  CHECK(r.ended);
  CHECK_FALSE(r.closed);
  CHECK(session.open_streams() == 1);
  CHECK_FALSE(session.idle());

  const HeaderView head[] = {{":status", "200"}, {"x-a", "1"}};
  CHECK(session.respond(id, head, false));
  CHECK_FALSE(session.respond(id, head, false));  // once only
  CHECK(session.write(id, bytes("body-1;")));
  run();
  CHECK(client.streams[id].body == "body-1;");
  CHECK_FALSE(client.streams[id].closed);
  CHECK(session.write(id, bytes("body-2")));
  const HeaderView trailers[] = {{"x-trailer", "yes"}};
  CHECK(session.finish(id, trailers));
  CHECK_FALSE(session.write(id, bytes("late")));
  run();
  const auto& s = client.streams[id];
  CHECK(s.header(":status") == "200");
  CHECK(s.header("x-a") == "1");
  CHECK(s.body == "body-1;body-2");
  CHECK(s.trailer("x-trailer") == "yes");
  CHECK(s.closed);
  CHECK(app.requests[id].closed);
  CHECK(app.requests[id].close_code == 0);
  CHECK(app.order == std::vector<std::string>{"request:1", "end:1", "close:1"});
  CHECK(session.idle());
}

TEST_CASE_FIXTURE(Fixture,
                  "a body adopted by write_buffer spans DATA frames; the next stream "
                  "starts clean") {
  // 40 000 bytes: three DATA frames of at most 16 384 (RFC 9113 §4.2 default),
  // each written by the no-copy send callback.
  std::string big(40'000, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  const auto first = get("/big", "one");
  run();
  const HeaderView head[] = {{":status", "200"}};
  REQUIRE(session.respond(first, head, false));
  ResponseBytes buffer(big.begin(), big.end());
  CHECK(session.write_buffer(first, buffer));
  CHECK(buffer.empty());
  CHECK(session.write(first, bytes("+tail")));  // appended behind the adopted bytes
  CHECK(session.finish(first, {}));
  run();
  CHECK(client.streams[first].body == big + "+tail");
  CHECK(client.streams[first].closed);
  CHECK(session.idle());

  // The finished stream is reused for the next one: nothing of it leaks over.
  const auto second = client.request({{":method", "POST"},
                                      {":scheme", "http"},
                                      {":authority", "localhost"},
                                      {":path", "/small"},
                                      {"x-second", "2"}},
                                     "two", true);
  run();
  const auto& r = app.requests[second];
  CHECK(r.headers.at(":path") == "/small");
  CHECK(r.headers.at("x-second") == "2");
  CHECK(r.headers.size() == 5);
  CHECK(r.body == "two");
  CHECK(r.ended);
  REQUIRE(session.respond(second, head, false));
  ResponseBytes small = "ok";
  CHECK(session.write_buffer(second, small));
  const HeaderView trailers[] = {{"x-t", "y"}};
  CHECK(session.finish(second, trailers));
  run();
  CHECK(client.streams[second].body == "ok");
  CHECK(client.streams[second].trailer("x-t") == "y");
  CHECK(client.streams[second].closed);
  CHECK(app.requests[first].body == "one");
}

TEST_CASE_FIXTURE(Fixture, "finish without trailers ends with END_STREAM on DATA") {
  const auto id = get("/b");
  run();
  const HeaderView head[] = {{":status", "200"}};
  session.respond(id, head, false);
  session.write(id, bytes("x"));
  session.finish(id, {});
  run();
  CHECK(client.streams[id].body == "x");
  CHECK(client.streams[id].trailers.empty());
  CHECK(client.streams[id].closed);
}

TEST_CASE_FIXTURE(Fixture, "a response ended while the client still sends is reset with NO_ERROR") {
  const auto id = get("/c", "partial", false);
  run();
  const HeaderView head[] = {{":status", "200"}};
  session.respond(id, head, true);
  run();
  CHECK(client.streams[id].rst_received);
  CHECK(client.streams[id].close_error_code == 0);
  CHECK(app.requests[id].closed);
  CHECK(session.idle());
}

TEST_CASE_FIXTURE(Fixture, "client RST_STREAM CANCEL closes the stream with code 8") {
  const auto id = get("/d", "x", false);
  run();
  client.cancel(id);
  run();
  CHECK(app.requests[id].closed);
  CHECK(app.requests[id].close_code == 8);
  CHECK(app.requests[id].body == "x");
  const HeaderView head[] = {{":status", "200"}};
  CHECK_FALSE(session.respond(id, head, true));
  CHECK(session.idle());
}

TEST_CASE("SETTINGS carry our limits; an oversized header list gets 431") {
  Fixture f(small_limits());
  const auto id = f.client.request({{":method", "POST"},
                                    {":scheme", "http"},
                                    {":authority", "localhost"},
                                    {":path", "/big"},
                                    {"x-big", std::string(300, 'v')}},
                                   "", true);
  f.run();
  CHECK(f.client.server_max_concurrent == 7);
  CHECK(f.client.streams[id].header(":status") == "431");
  CHECK(f.app.requests.count(id) == 0);  // the application never saw it
  CHECK(f.session.idle());
}

TEST_CASE_FIXTURE(Fixture, "a non-HTTP/2 client preface closes the connection") {
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  CHECK_FALSE(session.on_data(bytes(junk)));
}

namespace {
// Opens and cancels `n` streams in one flight against a fresh session.
bool flood_closes(const ic::h2::Limits& l, int n, std::uint32_t* goaway_error) {
  ic::test::H2Client flood;
  ic::test::FakeConnection conn;
  ic::h2::ServerSession session(conn, l, recording_app());
  ic::test::pump(flood, session, conn);
  std::string flight;
  for (int i = 0; i < n; ++i) {
    const auto id = flood.request(
        {{":method", "POST"}, {":scheme", "http"}, {":authority", "localhost"}, {":path", "/r"}},
        "x", false);
    flight += flood.take_output();
    flood.cancel(id);
  }
  flight += flood.take_output();
  session.on_data(bytes(flight));
  ic::test::pump(flood, session, conn);
  *goaway_error = flood.goaway_error;
  return flood.goaway_received && conn.closed;
}
}  // namespace

TEST_CASE("rapid reset: more RST_STREAMs than the budget end the connection with GOAWAY") {
  ic::h2::Limits tight;
  tight.reset_burst = 5;
  tight.reset_rate_per_s = 1;
  std::uint32_t code = 99;
  CHECK(flood_closes(tight, 20, &code));
  CHECK(code == NGHTTP2_ENHANCE_YOUR_CALM);  // our bucket acts before nghttp2's
  // the same 20 resets are fine under the default budget (200)
  CHECK_FALSE(flood_closes(ic::h2::Limits{}, 20, &code));
}

TEST_CASE_FIXTURE(Fixture, "output over the cap pauses reading; below half of it resumes") {
  run();
  conn.queued = limits.output_queue_cap_bytes + 1;
  session.flush();
  CHECK(conn.paused);
  conn.queued = limits.output_queue_cap_bytes / 2 + 1;
  session.flush();
  CHECK(conn.paused);
  conn.queued = limits.output_queue_cap_bytes / 2;
  session.flush();
  CHECK_FALSE(conn.paused);
}

TEST_CASE_FIXTURE(Fixture, "output of one flush is coalesced into one send") {
  run();
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(get("/m"));
  const std::string up = client.take_output();
  session.on_data(bytes(up));
  for (auto id : ids) {
    const HeaderView head[] = {{":status", "204"}};
    session.respond(id, head, true);
  }
  const int before = conn.sends;
  session.flush();
  CHECK(conn.sends == before + 1);
  client.receive(conn.out);
  conn.out.clear();
  for (auto id : ids) CHECK(client.streams[id].header(":status") == "204");
}

TEST_CASE_FIXTURE(Fixture,
                  "GOAWAY on shutdown names the last processed stream; then close when idle") {
  const auto id = get("/s", "", false);
  run();
  session.on_shutdown();
  CHECK(session.shutting_down());
  CHECK(conn.flush_requests >= 1);
  run();
  CHECK(client.goaway_received);
  CHECK(client.goaway_last_stream == id);
  CHECK(client.goaway_error == 0);
  CHECK_FALSE(conn.closed);
  const HeaderView head[] = {{":status", "200"}};
  session.respond(id, head, true);
  run();
  CHECK(conn.closed);
  CHECK_FALSE(conn.aborted);
}

TEST_CASE_FIXTURE(Fixture, "on_close reports open streams closed with CANCEL") {
  const auto id = get("/x", "", false);
  run();
  session.on_close();
  CHECK(app.requests[id].closed);
  CHECK(app.requests[id].close_code == 8);
  CHECK(session.idle());
  CHECK_FALSE(session.on_data(bytes("x")));
}
