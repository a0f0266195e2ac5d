#include "rpc/status.hh"

#include <array>

namespace ic::rpc {
namespace {

constexpr std::array<std::string_view, 17> kNames = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

constexpr std::array<std::string_view, 17> kDigits = {
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"};

constexpr char kHex[] = "0123456789ABCDEF";

}  // namespace

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view status_name(StatusCode code) {
  const auto i = static_cast<std::size_t>(code);
  return i < kNames.size() ? kNames[i] : std::string_view("UNKNOWN");
}

std::string_view status_digits(StatusCode code) {
  const auto i = static_cast<std::size_t>(code);
  return i < kDigits.size() ? kDigits[i] : std::string_view("2");
}

std::string percent_encode_message(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char ch : message) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte <= 0x7E && byte != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::string percent_decode_message(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size()) {
      const int hi = hex_digit_value(encoded[i + 1]);
      const int lo = hex_digit_value(encoded[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>((hi << 4) | lo));
        i += 2;
        continue;
      }
    }
    out.push_back(encoded[i]);
  }
  return out;
}

}  // namespace ic::rpc
