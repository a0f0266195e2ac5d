#include "rpc/status.hh"

#include <doctest/doctest.h>

#include <string_view>

using namespace ic::rpc;

TEST_CASE("status names and digits follow statuscodes.md") {
  struct Row {
    StatusCode code;
    std::string_view name;
    std::string_view digits;
  };
  const Row rows[] = {{StatusCode::kOk, "OK", "0"},
                      {StatusCode::kInvalidArgument, "INVALID_ARGUMENT", "3"},
                      {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED", "4"},
                      {StatusCode::kNotFound, "NOT_FOUND", "5"},
                      {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED", "8"},
                      {StatusCode::kUnimplemented, "UNIMPLEMENTED", "12"},
                      {StatusCode::kUnavailable, "UNAVAILABLE", "14"},
                      {StatusCode::kUnauthenticated, "UNAUTHENTICATED", "16"}};
  for (const Row& r : rows) {
    CHECK(status_name(r.code) == r.name);
    CHECK(status_digits(r.code) == r.digits);
  }
  CHECK(status_name(static_cast<StatusCode>(99)) == "UNKNOWN");
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
