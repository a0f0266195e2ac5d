#pragma once
// HTTP/1.1 responses of the admin listeners and their wire form (RFC 9112 §4,
// §6): status line, Content-Type, Content-Length, extra headers, body.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ic::admin {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra header fields in order, e.g. {"Allow", "GET"}, {"WWW-Authenticate", "Bearer"}.
  std::vector<std::pair<std::string, std::string>> headers;

  // A text/plain response whose body is exactly `text` ("ok", "not ready",
  // a one-line reason), no trailing newline.
  static HttpResponse text(int status, std::string_view text);
  // 405 with the Allow header listing `allow` (e.g. "POST, PUT").
  static HttpResponse method_not_allowed(std::string_view allow);
};

// Reason phrase for `status` (RFC 9110 §15), "Unknown" for others.
std::string_view reason_phrase(int status);

// The full response bytes. Content-Length is always sent except for 1xx and
// 204 (which carry no body); `keep_alive == false` adds "Connection: close".
// `head`: the answer to a HEAD request, the same header section (Content-Length
// of the body a GET would get) without the body (RFC 9110 §9.3.2).
std::string serialize(const HttpResponse& response, bool keep_alive, bool head = false);

}  // namespace ic::admin
