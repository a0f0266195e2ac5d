#pragma once
// Incremental, sans-IO HTTP/1.1 request parser for the admin listeners
// (RFC 9112 message syntax). Bytes arrive in any split; each complete request
// is handed out whole. Every dimension a peer controls is bounded (request
// line, header bytes, header count, body), so a hostile client costs at most
// Limits bytes of memory per connection (docs/architecture.md rule 9).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ic::admin {

// Bounds of one request; exceeding one is answered with the status noted.
struct HttpLimits {
  std::size_t max_request_line = 8 * 1024;   // bytes incl. CRLF → 414
  std::size_t max_header_bytes = 16 * 1024;  // header section after the request line → 431
  std::size_t max_headers = 64;              // header fields → 431
  std::size_t max_body = 1 << 20;            // Content-Length bytes → 413 (docs/policy.md 1 MiB)
};

// One parsed request. Header names are lower-cased; values have surrounding
// whitespace trimmed; repeated fields stay separate entries in arrival order.
struct HttpRequest {
  std::string method;     // case-sensitive token, e.g. "GET"
  std::string target;     // origin-form, e.g. "/metrics?x=1"
  int version_minor = 1;  // HTTP/1.<minor>: 0 or 1
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = true;        // 1.1 unless "Connection: close"; 1.0 only with keep-alive
  bool expect_continue = false;  // "Expect: 100-continue" was sent

  // Path part of the target (before '?').
  std::string_view path() const;
  // First value of header `lower_name` (already lower-case), if present.
  std::optional<std::string_view> header(std::string_view lower_name) const;
};

// A request the parser refuses; the connection answers `status` with
// `reason` as the body and then closes (framing can no longer be trusted).
struct HttpError {
  int status = 400;    // 400, 411, 413, 414, 431, 501, 505
  std::string reason;  // one line, e.g. "bad request line"
};

class HttpParser {
 public:
  enum class State {
    kNeedMore,  // no complete request buffered yet
    kRequest,   // request() holds the next complete request
    kError,     // error() says why; the parser stays in this state
  };

  explicit HttpParser(HttpLimits limits = {}) : limits_(limits) {}

  // Appends received bytes to the internal buffer (bounded by the limits:
  // bytes past a complete request stay buffered for pipelining; the caller
  // stops reading while a request is being served).
  void feed(std::span<const std::byte> bytes);
  void feed(std::string_view bytes);

  // Advances over the buffered bytes. After kRequest, take the request with
  // take_request(); the next call parses the following pipelined request.
  State next();
  HttpRequest take_request() { return std::move(request_); }
  const HttpError& error() const { return error_; }

  // The head of the current request is complete, its body is still coming
  // and the client asked for "100 Continue" (the session sends it once).
  bool wants_continue() const { return head_done_ && request_.expect_continue; }
  // Bytes received and not yet part of a returned request.
  std::size_t buffered() const { return buffer_.size() - consumed_; }
  // A request has started arriving (at least one non-blank byte) but is
  // not complete: the slow-sender timer runs while this is true.
  bool in_progress() const;

 private:
  State fail(int status, std::string reason);
  bool reject(int status, std::string reason);  // fail() for bool-returning steps
  // Looks for the end of the head; parses it when found.
  State parse_head();
  bool parse_request_line(std::string_view line);
  bool parse_header_line(std::string_view line);
  bool finish_head();
  void compact();

  HttpLimits limits_;
  std::string buffer_;
  std::size_t consumed_ = 0;   // bytes of buffer_ already handed out
  std::size_t scan_from_ = 0;  // where the search for the head's end resumes
  bool head_done_ = false;
  std::size_t body_length_ = 0;
  HttpRequest request_;
  HttpError error_;
  bool failed_ = false;
};

}  // namespace ic::admin
