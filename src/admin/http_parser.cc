#include "admin/http_parser.hh"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace ic::admin {

namespace {

// RFC 9110 §5.6.2 tchar.
bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// Field value octets (RFC 9110 §5.5): VCHAR, SP, HTAB, obs-text.
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
  });
}

// origin-form target (RFC 9112 §3.2.1): "/" then visible ASCII / obs-text.
bool is_origin_form(std::string_view s) {
  return !s.empty() && s.front() == '/' && std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c > 0x20 && c != 0x7f;
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

// Calls fn(token) for each comma-separated, trimmed, non-empty list element.
template <typename F>
void for_each_list_item(std::string_view list, F fn) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// Strips the line terminator: "\r\n" or a bare "\n" (RFC 9112 §2.2 lets a
// recipient accept LF). Returns false for a stray CR anywhere else.
bool strip_eol(std::string_view& line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line.find('\r') == std::string_view::npos;
}

}  // namespace

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::optional<std::string_view> HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return std::nullopt;
}

void HttpParser::feed(std::span<const std::byte> bytes) {
  feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void HttpParser::feed(std::string_view bytes) {
  compact();
  buffer_.append(bytes);
}

void HttpParser::compact() {
  if (consumed_ == 0) return;
  buffer_.erase(0, consumed_);
  scan_from_ -= std::min(scan_from_, consumed_);
  consumed_ = 0;
}

bool HttpParser::in_progress() const {
  if (head_done_) return true;
  // Blank lines before a request line are tolerated and do not count.
  const std::string_view rest = std::string_view(buffer_).substr(consumed_);
  return rest.find_first_not_of("\r\n") != std::string_view::npos;
}

HttpParser::State HttpParser::fail(int status, std::string reason) {
  failed_ = true;
  error_ = HttpError{status, std::move(reason)};
  return State::kError;
}

bool HttpParser::reject(int status, std::string reason) {
  fail(status, std::move(reason));
  return false;
}

HttpParser::State HttpParser::next() {
  if (failed_) return State::kError;
  if (!head_done_) {
    const State head = parse_head();
    if (head != State::kRequest) return head;
  }
  if (buffered() < body_length_) return State::kNeedMore;
  request_.body.assign(buffer_, consumed_, body_length_);
  consumed_ += body_length_;
  head_done_ = false;
  body_length_ = 0;
  scan_from_ = consumed_;
  return State::kRequest;
}

HttpParser::State HttpParser::parse_head() {
  // RFC 9112 §2.2: ignore empty lines received before the request line.
  while (consumed_ < buffer_.size()) {
    if (buffer_.compare(consumed_, 2, "\r\n") == 0) {
      consumed_ += 2;
    } else if (buffer_[consumed_] == '\n') {
      consumed_ += 1;
    } else if (buffer_[consumed_] == '\r' && consumed_ + 1 == buffer_.size()) {
      return State::kNeedMore;  // maybe the first half of a CRLF
    } else {
      break;
    }
  }
  scan_from_ = std::max(scan_from_, consumed_);
  const std::string_view rest = std::string_view(buffer_).substr(consumed_);
  const std::size_t line_end = rest.find('\n');
  if (line_end == std::string_view::npos) {
    if (rest.size() > limits_.max_request_line) return fail(414, "request line too long");
    return State::kNeedMore;
  }
  if (line_end + 1 > limits_.max_request_line) return fail(414, "request line too long");
  // The header section ends at an empty line: "\n\r\n" or "\n\n" after the
  // request line. Resume the search where the previous call stopped.
  const std::size_t search_start = std::max(scan_from_ - consumed_, line_end);
  std::size_t head_end = std::string_view::npos;  // offset just past the empty line
  for (std::size_t i = search_start; i < rest.size(); ++i) {
    if (rest[i] != '\n') continue;
    if (i + 1 < rest.size() && rest[i + 1] == '\n') {
      head_end = i + 2;
      break;
    }
    if (i + 2 < rest.size() && rest[i + 1] == '\r' && rest[i + 2] == '\n') {
      head_end = i + 3;
      break;
    }
  }
  const std::size_t header_bytes =
      (head_end == std::string_view::npos ? rest.size() : head_end) - (line_end + 1);
  if (header_bytes > limits_.max_header_bytes) return fail(431, "request header section too large");
  if (head_end == std::string_view::npos) {
    // Re-scan the last two bytes next time: they may start the empty line.
    scan_from_ = consumed_ + (rest.size() >= 2 ? rest.size() - 2 : 0);
    return State::kNeedMore;
  }

  request_ = HttpRequest{};
  if (!parse_request_line(rest.substr(0, line_end + 1))) return State::kError;
  std::string_view headers = rest.substr(line_end + 1, head_end - (line_end + 1));
  while (true) {
    const std::size_t eol = headers.find('\n');
    std::string_view line = headers.substr(0, eol);
    headers.remove_prefix(eol + 1);
    if (!strip_eol(line)) return fail(400, "stray CR in header section");
    if (line.empty()) break;  // the empty line that ends the head
    if (!parse_header_line(line)) return State::kError;
  }
  if (!finish_head()) return State::kError;
  consumed_ += head_end;
  scan_from_ = consumed_;
  head_done_ = true;
  return State::kRequest;
}

bool HttpParser::parse_request_line(std::string_view line) {
  line.remove_suffix(1);  // '\n'
  if (!strip_eol(line)) return reject(400, "bad request line");
  // method SP request-target SP HTTP-version, single spaces (RFC 9112 §3).
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return reject(400, "bad request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return reject(400, "bad request line: method");
  if (!is_origin_form(target)) return reject(400, "bad request line: target");
  if (version == "HTTP/1.1") {
    request_.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    request_.version_minor = 0;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" &&
             std::isdigit(static_cast<unsigned char>(version[5])) && version[6] == '.' &&
             std::isdigit(static_cast<unsigned char>(version[7]))) {
    return reject(505, "HTTP version not supported");
  } else {
    return reject(400, "bad request line: version");
  }
  request_.method = method;
  request_.target = target;
  return true;
}

bool HttpParser::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    return reject(400, "obsolete header line folding");
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return reject(400, "header line without colon");
  const std::string_view name = line.substr(0, colon);
  // No whitespace between name and colon (RFC 9112 §5.1): is_token rejects it.
  if (!is_token(name)) return reject(400, "bad header name");
  const std::string_view value = trim(line.substr(colon + 1));
  if (!is_field_value(value)) return reject(400, "bad header value");
  if (request_.headers.size() >= limits_.max_headers) {
    return reject(431, "too many request header fields");
  }
  request_.headers.emplace_back(lower(name), std::string(value));
  return true;
}

bool HttpParser::finish_head() {
  std::optional<std::uint64_t> length;
  std::size_t hosts = 0;
  bool close = false;
  bool keep_alive = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "transfer-encoding") {
      bool chunked = false;
      for_each_list_item(
          value, [&](std::string_view coding) { chunked = chunked || iequals(coding, "chunked"); });
      // Bodies are small and sized up front (docs/policy.md: ≤ 1 MiB).
      if (chunked) return reject(411, "chunked transfer coding not supported; send Content-Length");
      return reject(501, "unsupported transfer coding; send Content-Length");
    }
    if (name == "content-length") {
      bool ok = true;
      for_each_list_item(value, [&](std::string_view item) {
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
        if (ec != std::errc{} || end != item.data() + item.size() || (length && *length != n)) {
          ok = false;
        }
        length = n;
      });
      if (!ok || !length) return reject(400, "bad Content-Length");
    } else if (name == "host") {
      ++hosts;
    } else if (name == "connection") {
      for_each_list_item(value, [&](std::string_view option) {
        close = close || iequals(option, "close");
        keep_alive = keep_alive || iequals(option, "keep-alive");
      });
    } else if (name == "expect") {
      request_.expect_continue = iequals(value, "100-continue");
    }
  }
  if (request_.version_minor == 1 && hosts != 1) {
    return reject(400, hosts == 0 ? "missing Host header" : "more than one Host header");
  }
  if (length && *length > limits_.max_body) return reject(413, "request body too large");
  body_length_ = static_cast<std::size_t>(length.value_or(0));
  request_.keep_alive = request_.version_minor == 1 ? !close : (keep_alive && !close);
  if (body_length_ == 0) request_.expect_continue = false;
  return true;
}

}  // namespace ic::admin
