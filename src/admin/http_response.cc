#include "admin/http_response.hh"

namespace ic::admin {

HttpResponse HttpResponse::text(int status, std::string_view text) {
  HttpResponse r;
  r.status = status;
  r.body.assign(text);
  return r;
}

HttpResponse HttpResponse::method_not_allowed(std::string_view allow) {
  HttpResponse r = text(405, "method not allowed");
  r.headers.emplace_back("Allow", std::string(allow));
  return r;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string serialize(const HttpResponse& response, bool keep_alive, bool head) {
  const bool has_body = response.status >= 200 && response.status != 204;
  std::string out;
  out.reserve(128 + response.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(response.status);
  out += ' ';
  out += reason_phrase(response.status);
  out += "\r\n";
  if (has_body) {
    out += "Content-Type: ";
    out += response.content_type;
    out += "\r\nContent-Length: ";
    out += std::to_string(response.body.size());
    out += "\r\n";
  }
  for (const auto& [name, value] : response.headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  if (has_body && !head) out += response.body;
  return out;
}

}  // namespace ic::admin
