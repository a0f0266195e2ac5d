#pragma once
// The `grpc-timeout` request header (grpc/doc/PROTOCOL-HTTP2.md):
// Timeout = TimeoutValue TimeoutUnit; TimeoutValue = 1*8 ASCII digits;
// TimeoutUnit = H (hours) / M (minutes) / S (seconds) / m (ms) / u (µs) / n (ns).

#include <cstdint>
#include <optional>
#include <string_view>

namespace ic::rpc {

// Parses a grpc-timeout value into µs (nanoseconds round UP to the next µs so
// a tiny positive timeout never reads as "already expired").
// Returns nullopt for anything malformed (empty, more than 8 digits, a sign,
// spaces, unknown or missing unit). Like grpc-core, the caller then ignores the
// header: the call runs without a deadline.
std::optional<std::int64_t> parse_grpc_timeout_us(std::string_view value);

}  // namespace ic::rpc
