#pragma once
// The tests' own gRPC message codec, written apart from src/rpc on purpose
// (an oracle: a bug in the server's framing cannot hide in both): 1 flag byte
// (bit 0: compressed) + 4 byte big-endian length + payload (grpc/grpc
// PROTOCOL-HTTP2.md, "Length-Prefixed-Message"; docs/contract.md "Transport
// rules"). Used by the unit tests' in-memory harness and the integration tests.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ic::itest {

// gRPC status codes (grpc/grpc doc/statuscodes.md) the tests assert.
enum GrpcCode : int {
  kOk = 0,
  kCancelled = 1,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kResourceExhausted = 8,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

// The 5-byte prefix for a payload of `length` bytes; `flags` is the flag byte
// (1 = compressed; other values only to test how a peer rejects them).
std::string frame_prefix(uint32_t length, uint8_t flags = 0);
// `payload` with its prefix.
std::string frame(std::string_view payload, uint8_t flags = 0);
// A serialized protobuf message with its prefix (Msg: any google::protobuf::MessageLite).
template <class Msg>
std::string frame_message(const Msg& msg) {
  return frame(msg.SerializeAsString());
}
// Splits a complete response body into message payloads. Throws
// std::runtime_error on a truncated body or a set compressed flag.
std::vector<std::string> unframe(std::string_view body);
// Exactly one message of type Msg from `body`; throws otherwise.
template <class Msg>
Msg parse_single(std::string_view body) {
  auto parts = unframe(body);
  if (parts.size() != 1) {
    throw std::runtime_error("expected 1 message, got " + std::to_string(parts.size()));
  }
  Msg msg;
  if (!msg.ParseFromString(parts[0])) throw std::runtime_error("response does not parse");
  return msg;
}
// Decodes %XX escapes of grpc-message (PROTOCOL-HTTP2.md "Status-Message").
std::string percent_decode(std::string_view s);

// Method paths of the contract (docs/contract.md "Identity").
inline constexpr std::string_view kService = "/inferencecache.v1alpha1.InferenceCache/";
inline std::string method_path(std::string_view method) {
  return std::string(kService) + std::string(method);
}
inline constexpr std::string_view kHealthCheckPath = "/grpc.health.v1.Health/Check";
inline const std::string kLookupRoutePath = method_path("LookupRoute");
inline const std::string kReportCacheStatePath = method_path("ReportCacheState");

}  // namespace ic::itest
