#pragma once
// gRPC status codes and the grpc-message percent-encoding
// (grpc/doc/statuscodes.md, grpc/doc/PROTOCOL-HTTP2.md "Responses").

#include <cstdint>
#include <string>
#include <string_view>

namespace ic::rpc {

// The canonical gRPC status codes; the numeric value travels in the
// `grpc-status` trailer as decimal ASCII.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// A call's final outcome: code plus a human-readable message (UTF-8, sent
// percent-encoded in `grpc-message`; empty means no grpc-message trailer).
struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;

  static Status ok() { return {}; }
  bool is_ok() const { return code == StatusCode::kOk; }
};

// Upper-case name as in statuscodes.md, e.g. "RESOURCE_EXHAUSTED"; "UNKNOWN"
// for a value outside 0..16.
std::string_view status_name(StatusCode code);

// Decimal text of the code for the `grpc-status` trailer, e.g. "8".
std::string_view status_digits(StatusCode code);

// Percent-encodes a grpc-message: bytes 0x20..0x7E except '%' pass through,
// every other byte becomes "%XX" with upper-case hex (PROTOCOL-HTTP2.md,
// Percent-Byte-Unencoded / Percent-Byte-Encoded).
std::string percent_encode_message(std::string_view message);

// Inverse of percent_encode_message. A '%' not followed by two hex digits is
// kept literally, as the spec asks receivers to do for malformed input.
std::string percent_decode_message(std::string_view encoded);

// The value of one hex digit ([0-9a-fA-F] → 0..15), -1 for any other char;
// shared with the tools' hex input (tools/common/requests.hh hex_decode).
int hex_digit_value(char c);

}  // namespace ic::rpc
