#include "rpc/status.hh"

#include <doctest/doctest.h>

using namespace ic::rpc;

TEST_CASE("status names and digits follow statuscodes.md") {
  CHECK(status_name(StatusCode::kOk) == "OK");
  CHECK(status_name(StatusCode::kInvalidArgument) == "INVALID_ARGUMENT");
  CHECK(status_name(StatusCode::kDeadlineExceeded) == "DEADLINE_EXCEEDED");
  CHECK(status_name(StatusCode::kResourceExhausted) == "RESOURCE_EXHAUSTED");
  CHECK(status_name(StatusCode::kUnimplemented) == "UNIMPLEMENTED");
  CHECK(status_name(StatusCode::kUnauthenticated) == "UNAUTHENTICATED");
  CHECK(status_name(static_cast<StatusCode>(99)) == "UNKNOWN");
  CHECK(status_digits(StatusCode::kOk) == "0");
  CHECK(status_digits(StatusCode::kNotFound) == "5");
  CHECK(status_digits(StatusCode::kResourceExhausted) == "8");
  CHECK(status_digits(StatusCode::kUnimplemented) == "12");
  CHECK(status_digits(StatusCode::kUnavailable) == "14");
  CHECK(status_digits(StatusCode::kUnauthenticated) == "16");
}

TEST_CASE("grpc-message percent-encoding") {
  struct Row {
    std::string_view raw;
    std::string_view encoded;
  };
  const Row rows[] = {
      {"", ""},
      {"hello world", "hello world"},
      {"100%", "100%25"},
      {"a\nb", "a%0Ab"},
      {"tab\t", "tab%09"},
      {"\xC3\xBC", "%C3%BC"},
      {"~!", "~!"},
      {"\x7F", "%7F"},
      {std::string_view("\0", 1), "%00"},
      {"unknown method /a.B/C", "unknown method /a.B/C"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.raw);
    CHECK(percent_encode_message(r.raw) == r.encoded);
    CHECK(percent_decode_message(r.encoded) == r.raw);
  }
}

TEST_CASE("percent-decoding keeps malformed escapes literally") {
  CHECK(percent_decode_message("%zz") == "%zz");
  CHECK(percent_decode_message("%4") == "%4");
  CHECK(percent_decode_message("50%") == "50%");
  CHECK(percent_decode_message("%41%c3%bc") == "A\xC3\xBC");
}
