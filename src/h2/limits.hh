#pragma once
// Hostile-peer limits for one HTTP/2 server connection (docs/architecture.md rule 9).
// All are on by default.

#include <cstddef>
#include <cstdint>

namespace ic::h2 {

struct Limits {
  // SETTINGS_MAX_CONCURRENT_STREAMS we advertise; nghttp2 refuses streams over
  // it with RST_STREAM REFUSED_STREAM (RFC 9113 §5.1.2).
  std::uint32_t max_concurrent_streams = 100;
  // SETTINGS_MAX_HEADER_LIST_SIZE (bytes, RFC 9113 §6.5.2: name + value + 32
  // per field). A request over it is reset with RST_STREAM.
  std::uint32_t max_header_list_bytes = 16 * 1024;
  // CONTINUATION frames accepted after one HEADERS (CVE-2024-27316 class).
  std::size_t max_continuations = 8;
  // Incoming RST_STREAM token bucket (CVE-2023-44487 "rapid reset"): `burst`
  // resets, refilled at `rate` per second; over it nghttp2 sends GOAWAY.
  std::uint64_t reset_burst = 1000;
  std::uint64_t reset_rate_per_s = 33;
  // SETTINGS_INITIAL_WINDOW_SIZE for request bodies (bytes).
  std::uint32_t initial_window_bytes = 1024 * 1024;
  // Output queued on the connection above which we stop reading requests
  // (bytes); reading resumes below half of it (docs/architecture.md rule 5).
  std::size_t output_queue_cap_bytes = 4 * 1024 * 1024;
};

}  // namespace ic::h2
