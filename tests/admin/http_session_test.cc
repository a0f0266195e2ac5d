#include "admin/http_session.hh"

#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "fakes.hh"

using namespace ic::admin;
using ic::admin::testing::bytes_of;
using ic::admin::testing::FakeConnection;
using ic::admin::testing::FakeTimers;

namespace {

// Answers "<method> <target> <body>" at once, or holds the responder when
// the path is /later.
struct EchoHandler {
  std::optional<Responder>* held;
  void operator()(HttpRequest& request, Responder respond) const {
    if (request.path() == "/later") {
      *held = respond;
      return;
    }
    respond(HttpResponse::text(200, request.method + " " + request.target + " " + request.body));
  }
};

struct Fixture {
  FakeConnection conn;
  FakeTimers timers;
  std::optional<Responder> held;
  HttpSession session{conn, EchoHandler{&held}, timers, HttpSessionOptions{}};

  void feed(std::string_view s) { REQUIRE(session.on_data(bytes_of(s))); }
};

std::string ok_response(std::string_view text, bool keep_alive = true) {
  std::string body(text);
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + (keep_alive ? "" : "Connection: close\r\n") +
         "\r\n" + body;
}

}  // namespace

TEST_CASE("responses serialize with length, extra headers and Connection: close") {
  HttpResponse r = HttpResponse::method_not_allowed("POST, PUT");
  CHECK(serialize(r, false) ==
        "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: 18\r\nAllow: POST, PUT\r\nConnection: close\r\n\r\nmethod not allowed");
  HttpResponse empty;
  empty.status = 204;
  CHECK(serialize(empty, true) == "HTTP/1.1 204 No Content\r\n\r\n");
}

TEST_CASE("pipelined requests in one segment are answered in order") {
  Fixture f;
  f.feed(
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: "
      "2\r\n\r\nhi");
  CHECK(f.conn.out == ok_response("GET /a ") + ok_response("POST /b hi"));
  CHECK_FALSE(f.conn.closed);
  CHECK(f.session.idle());
}

TEST_CASE("an answer from later keeps order and resumes the buffered requests") {
  Fixture f;
  f.feed("GET /later HTTP/1.1\r\nHost: h\r\n\r\nGET /next HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(f.conn.out.empty());
  CHECK_FALSE(f.session.idle());
  CHECK(f.conn.pauses == 1);
  CHECK(f.conn.reading == false);
  REQUIRE(f.held.has_value());
  (*f.held)(HttpResponse::text(200, "late"));
  CHECK(f.conn.out == ok_response("late"));
  CHECK(f.conn.flush_requests == 1);
  f.session.flush();  // the loop turn the connection asked for
  CHECK(f.conn.out == ok_response("late") + ok_response("GET /next "));
  CHECK(f.conn.resumes == 1);
  // A second call of the same responder is ignored.
  (*f.held)(HttpResponse::text(200, "again"));
  CHECK(f.conn.out == ok_response("late") + ok_response("GET /next "));
}

TEST_CASE("a responder that fires after the connection closed does nothing") {
  std::optional<Responder> held;
  {
    FakeConnection conn;
    FakeTimers timers;
    HttpSession session(conn, EchoHandler{&held}, timers);
    session.on_data(bytes_of("GET /later HTTP/1.1\r\nHost: h\r\n\r\n"));
    session.on_close();
  }
  REQUIRE(held.has_value());
  (*held)(HttpResponse::text(200, "late"));  // must not touch the freed session
}

TEST_CASE("a malformed request gets 400 with its reason and the connection closes") {
  Fixture f;
  f.feed("GET /a HTTP/1.1\r\nHost: h\r\n\r\nNONSENSE\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(f.conn.out == ok_response("GET /a ") +
                          "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; "
                          "charset=utf-8\r\nContent-Length: 16\r\nConnection: close\r\n\r\n"
                          "bad request line");
  CHECK(f.conn.closed);
  f.feed("GET /c HTTP/1.1\r\nHost: h\r\n\r\n");  // ignored after the error
  CHECK(f.conn.out.find("/c") == std::string::npos);
}

TEST_CASE("Connection: close answers then closes") {
  Fixture f;
  f.feed(
      "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(f.conn.out == ok_response("GET /a ", false));
  CHECK(f.conn.closed);
}

TEST_CASE("a slow sender gets 408 and is closed when the request timer fires") {
  Fixture f;
  CHECK(f.timers.only_delay() == 60'000'000);  // idle keep-alive timer
  f.feed("GET /a HTTP/1.1\r\nHo");
  CHECK(f.timers.only_delay() == 10'000'000);  // request timer replaced it
  f.feed("st: h\r\n");                         // more bytes do not extend the deadline
  CHECK(f.timers.pending.size() == 1);
  CHECK(f.timers.fire_all() == 1);
  CHECK(f.conn.out ==
        "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: 29\r\nConnection: close\r\n\r\nrequest not completed in time");
  CHECK(f.conn.closed);
}

TEST_CASE("an idle keep-alive connection is closed silently") {
  Fixture f;
  f.feed("GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(f.timers.only_delay() == 60'000'000);
  f.conn.out.clear();
  CHECK(f.timers.fire_all() == 1);
  CHECK(f.conn.out.empty());
  CHECK(f.conn.closed);
}

TEST_CASE("no timer runs while a request is being served elsewhere") {
  Fixture f;
  f.feed("GET /later HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(f.timers.pending.empty());
  (*f.held)(HttpResponse::text(200, "x"));
  f.session.flush();
  CHECK(f.timers.only_delay() == 60'000'000);
}

TEST_CASE("100 Continue is sent once when the client waits for it") {
  Fixture f;
  f.feed("PUT /p HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  CHECK(f.conn.out == "HTTP/1.1 100 Continue\r\n\r\n");
  f.feed("a");
  CHECK(f.conn.out == "HTTP/1.1 100 Continue\r\n\r\n");
  f.feed("bc");
  CHECK(f.conn.out == "HTTP/1.1 100 Continue\r\n\r\n" + ok_response("PUT /p abc"));
}

TEST_CASE("requests stop being served while the peer does not read its answers") {
  Fixture f;
  f.conn.queued = (8u << 20) + 1;
  f.feed("GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(f.conn.out.empty());
  CHECK(f.conn.pauses == 1);
  f.conn.queued = 0;
  f.session.flush();
  CHECK(f.conn.resumes == 1);
  CHECK(f.conn.out == ok_response("GET /a "));
}

TEST_CASE("shutdown closes an idle connection and lets an in-flight request finish") {
  Fixture idle;
  idle.session.on_shutdown();
  CHECK(idle.conn.closed);

  Fixture busy;
  busy.feed("GET /later HTTP/1.1\r\nHost: h\r\n\r\n");
  busy.session.on_shutdown();
  CHECK_FALSE(busy.conn.closed);
  (*busy.held)(HttpResponse::text(200, "done"));
  CHECK(busy.conn.out == ok_response("done", false));
  CHECK(busy.conn.closed);
}
