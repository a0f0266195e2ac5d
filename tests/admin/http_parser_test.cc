#include "admin/http_parser.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace ic::admin;
using State = HttpParser::State;

namespace {

struct Outcome {
  std::vector<HttpRequest> requests;
  bool error = false;
  HttpError err;
};

// Feeds `input` in chunks split at `splits` (ascending offsets) and drains
// every complete request after each chunk.
Outcome parse(std::string_view input, const std::vector<std::size_t>& splits = {},
              HttpLimits limits = {}) {
  HttpParser parser(limits);
  Outcome out;
  std::size_t pos = 0;
  auto drain = [&] {
    while (true) {
      const State s = parser.next();
      if (s == State::kRequest) {
        out.requests.push_back(parser.take_request());
        continue;
      }
      if (s == State::kError) {
        out.error = true;
        out.err = parser.error();
      }
      return;
    }
  };
  for (std::size_t split : splits) {
    parser.feed(input.substr(pos, split - pos));
    pos = split;
    drain();
    if (out.error) return out;
  }
  parser.feed(input.substr(pos));
  drain();
  return out;
}

HttpError error_of(std::string_view input, HttpLimits limits = {}) {
  Outcome o = parse(input, {}, limits);
  REQUIRE(o.error);
  return o.err;
}

const std::string kPipeline =
    "GET /metrics HTTP/1.1\r\nHost: a\r\nUser-Agent: x\r\n\r\n"
    "POST /policy?v=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
    "Authorization:  Bearer t  \r\n\r\nhello"
    "GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

void check_pipeline(const Outcome& o) {
  REQUIRE_FALSE(o.error);
  REQUIRE(o.requests.size() == 3);
  CHECK(o.requests[0].method == "GET");
  CHECK(o.requests[0].target == "/metrics");
  CHECK(o.requests[0].headers.size() == 2);
  CHECK(o.requests[0].headers[1].first == "user-agent");
  CHECK(o.requests[0].body.empty());
  CHECK(o.requests[0].keep_alive);
  CHECK(o.requests[1].method == "POST");
  CHECK(o.requests[1].path() == "/policy");
  CHECK(o.requests[1].target == "/policy?v=1");
  CHECK(o.requests[1].header("authorization").value() == "Bearer t");
  CHECK(o.requests[1].body == "hello");
  CHECK(o.requests[2].path() == "/readyz");
  CHECK_FALSE(o.requests[2].keep_alive);
}

}  // namespace

TEST_CASE("pipelined requests parse whole in one chunk") { check_pipeline(parse(kPipeline)); }

TEST_CASE("pipelined requests parse the same split at every byte") {
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < kPipeline.size(); ++i) every.push_back(i);
  check_pipeline(parse(kPipeline, every));
}

TEST_CASE("pipelined requests parse the same split in two at every offset") {
  for (std::size_t i = 1; i < kPipeline.size(); ++i) {
    CAPTURE(i);
    check_pipeline(parse(kPipeline, {i}));
  }
}

TEST_CASE("blank lines before a request line and bare LF line ends are accepted") {
  Outcome o = parse("\r\n\nGET /healthz HTTP/1.1\nHost: a\n\n");
  REQUIRE(o.requests.size() == 1);
  CHECK(o.requests[0].target == "/healthz");
}

TEST_CASE("HTTP/1.0 closes unless keep-alive is asked; Host is optional there") {
  Outcome o = parse("GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  REQUIRE(o.requests.size() == 2);
  CHECK(o.requests[0].version_minor == 0);
  CHECK_FALSE(o.requests[0].keep_alive);
  CHECK(o.requests[1].keep_alive);
}

TEST_CASE("bad request lines are 400 with a reason; unknown versions 505") {
  CHECK(error_of("GET /\r\n\r\n").reason == "bad request line");
  CHECK(error_of("GET  / HTTP/1.1\r\n\r\n").reason == "bad request line");
  CHECK(error_of("GET / HTTP/1.1 \r\n\r\n").reason == "bad request line");
  CHECK(error_of("G(T / HTTP/1.1\r\n\r\n").reason == "bad request line: method");
  CHECK(error_of("GET http://a/ HTTP/1.1\r\n\r\n").reason == "bad request line: target");
  CHECK(error_of("GET / FTP/1.1\r\n\r\n").reason == "bad request line: version");
  CHECK(error_of("GET / HTTP/1.1\rX\r\n\r\n").reason == "bad request line");
  const HttpError v2 = error_of("PRI * HTTP/2.0\r\n\r\n");
  CHECK(v2.status == 400);  // '*' is not origin-form
  const HttpError v3 = error_of("GET / HTTP/3.0\r\nHost: a\r\n\r\n");
  CHECK(v3.status == 505);
  CHECK(v3.reason == "HTTP version not supported");
  CHECK(error_of(std::string("\x16\x03\x01\x02\x00\x01\r\n\r\n", 10)).status ==
        400);  // TLS to a cleartext port
}

TEST_CASE("bad header lines are 400") {
  CHECK(error_of("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n").reason ==
        "obsolete header line folding");
  CHECK(error_of("GET / HTTP/1.1\r\nHost : a\r\n\r\n").reason == "bad header name");
  CHECK(error_of("GET / HTTP/1.1\r\nHost a\r\n\r\n").reason == "header line without colon");
  CHECK(error_of(std::string("GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n")).reason ==
        "bad header value");
  CHECK(error_of("GET / HTTP/1.1\r\n\r\n").reason == "missing Host header");
  CHECK(error_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").reason ==
        "more than one Host header");
}

TEST_CASE("Content-Length must be digits and agree; bodies over the limit are 413") {
  CHECK(error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n").reason ==
        "bad Content-Length");
  CHECK(error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n").status == 400);
  CHECK(error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n").status == 400);
  CHECK(error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
            .status == 400);
  Outcome same = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\nok");
  REQUIRE(same.requests.size() == 1);
  CHECK(same.requests[0].body == "ok");

  HttpLimits limits;
  limits.max_body = 4;
  Outcome at_limit =
      parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd", {}, limits);
  REQUIRE(at_limit.requests.size() == 1);
  CHECK(at_limit.requests[0].body == "abcd");
  const HttpError over =
      error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", limits);
  CHECK(over.status == 413);
  CHECK(over.reason == "request body too large");
  // The default is the /policy limit of 1 MiB.
  CHECK(HttpLimits{}.max_body == 1048576);
  CHECK(error_of("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n").status == 413);
}

TEST_CASE("transfer codings: chunked is 411, others 501") {
  const HttpError chunked =
      error_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
  CHECK(chunked.status == 411);
  CHECK(chunked.reason == "chunked transfer coding not supported; send Content-Length");
  const HttpError gzip = error_of("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n");
  CHECK(gzip.status == 501);
  CHECK(gzip.reason == "unsupported transfer coding; send Content-Length");
}

TEST_CASE("request line limit: exactly at the limit passes, one byte more is 414") {
  HttpLimits limits;
  limits.max_request_line = 32;
  // "GET /" + pad + " HTTP/1.1\r\n" is 5 + pad + 11 bytes.
  const std::string at = "GET /" + std::string(16, 'a') + " HTTP/1.1\r\n";
  REQUIRE(at.size() == 32);
  CHECK(parse(at + "Host: a\r\n\r\n", {}, limits).requests.size() == 1);
  const std::string over = "GET /" + std::string(17, 'a') + " HTTP/1.1\r\n";
  const HttpError e = error_of(over + "Host: a\r\n\r\n", limits);
  CHECK(e.status == 414);
  CHECK(e.reason == "request line too long");
  // Without a line end yet: refused as soon as the buffer passes the limit.
  HttpParser parser(limits);
  parser.feed(std::string(32, 'G'));
  CHECK(parser.next() == State::kNeedMore);
  parser.feed("G");
  CHECK(parser.next() == State::kError);
  CHECK(parser.error().status == 414);
}

TEST_CASE("header section limit: exactly at the limit passes, one byte more is 431") {
  HttpLimits limits;
  limits.max_header_bytes = 32;
  // Header section = "Host: a\r\n" (9) + "X: " + v + "\r\n" + "\r\n".
  const std::string at = "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(16, 'v') + "\r\n\r\n";
  CHECK(parse(at, {}, limits).requests.size() == 1);
  const std::string over = "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(17, 'v') + "\r\n\r\n";
  const HttpError e = error_of(over, limits);
  CHECK(e.status == 431);
  CHECK(e.reason == "request header section too large");
  // An endless header section is refused before its end arrives.
  HttpParser parser(limits);
  parser.feed("GET / HTTP/1.1\r\n" + std::string(33, 'x'));
  CHECK(parser.next() == State::kError);
  CHECK(parser.error().status == 431);
}

TEST_CASE("header count limit: at the limit passes, one more is 431") {
  HttpLimits limits;
  limits.max_headers = 3;
  CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", {}, limits).requests.size() ==
        1);
  const HttpError e = error_of("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits);
  CHECK(e.status == 431);
  CHECK(e.reason == "too many request header fields");
}

TEST_CASE("an error is sticky") {
  HttpParser parser;
  parser.feed("BAD\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
  CHECK(parser.next() == State::kError);
  CHECK(parser.next() == State::kError);
}

TEST_CASE("in_progress and wants_continue follow the request") {
  HttpParser parser;
  CHECK_FALSE(parser.in_progress());
  parser.feed("\r\n");
  CHECK(parser.next() == State::kNeedMore);
  CHECK_FALSE(parser.in_progress());
  parser.feed("PO");
  CHECK(parser.next() == State::kNeedMore);
  CHECK(parser.in_progress());
  parser.feed(
      "ST /policy HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  CHECK(parser.next() == State::kNeedMore);
  CHECK(parser.wants_continue());
  parser.feed("{}");
  CHECK(parser.next() == State::kRequest);
  CHECK(parser.take_request().body == "{}");
  CHECK_FALSE(parser.in_progress());
  CHECK_FALSE(parser.wants_continue());
  CHECK(parser.buffered() == 0);
}
