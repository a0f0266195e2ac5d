#pragma once
// Hostile-peer limits for one HTTP/2 server connection (docs/architecture.md rule 9).
// All are on by default.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

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
  // Rapid reset (CVE-2023-44487): RST_STREAM frames a peer may send for
  // streams we have not answered yet, a token bucket of `reset_burst`
  // refilled at `reset_rate_per_s` (by the connection watchdog's ticks); over
  // it: GOAWAY ENHANCE_YOUR_CALM, parsing stopped at that frame. nghttp2's own
  // reset limiter gets the same numbers as a backstop (it counts every reset).
  std::uint64_t reset_burst = 200;
  std::uint64_t reset_rate_per_s = 33;
  // The input work one connection may do per reactor turn
  // (docs/hostile-peers.md "Fair turns"): frames parsed, request streams
  // opened (each costs the application a call), and header bytes decoded
  // (name + value + 32 per field). Input left over waits, reading paused,
  // for the next turn, so one peer's burst (rapid reset, stream floods,
  // header floods, HPACK bombs up to their cut) delays the other connections
  // of its core by about one budget (~50 µs), not by the whole burst.
  // Checked between 1 KiB slices of the input, so a turn may overshoot by one
  // slice.
  std::uint32_t turn_input_frames = 64;
  std::uint32_t turn_input_streams = 16;
  std::uint32_t turn_input_header_bytes = 16 * 1024;
  // Bytes parsed (every frame: DATA payloads are copied into the calls'
  // messages) per connection and turn: a 1 MB request message arrives over
  // four turns, so eight of them do not copy 8 MB in one turn.
  std::uint32_t turn_input_bytes = 256 * 1024;
  // SETTINGS_INITIAL_WINDOW_SIZE for request bodies (bytes).
  std::uint32_t initial_window_bytes = 1024 * 1024;
  // Output queued on the connection above which we stop reading requests
  // (bytes); reading resumes below half of it (docs/architecture.md rule 5).
  std::size_t output_queue_cap_bytes = 4 * 1024 * 1024;
  // HPACK expansion (docs/hostile-peers.md "Costly peers"): a header block
  // whose decoded size (name + value + 32 per field) passes this many times
  // max_header_list_bytes while being over `hpack_max_expansion` times its
  // wire bytes is cut mid-decode with GOAWAY ENHANCE_YOUR_CALM.
  std::uint32_t hpack_cut_lists = 4;
  std::uint32_t hpack_max_expansion = 8;
  // Requests answered 431 (header list over the limit) one connection may
  // cost before it gets GOAWAY ENHANCE_YOUR_CALM.
  std::uint32_t max_rejected_header_blocks = 64;
  // PING and SETTINGS frames (not ACKs) a peer may send: a token bucket of
  // `control_frame_burst`, refilled at `control_frame_rate_per_s` (by the
  // connection watchdog's ticks). Each costs us an ACK; over it: GOAWAY
  // ENHANCE_YOUR_CALM. gRPC keepalive and BDP pings stay far below it.
  std::uint32_t control_frame_burst = 1000;
  std::uint32_t control_frame_rate_per_s = 100;
};

// Why a connection or stream hit a hostile-peer limit, for
// inferencecache_peer_limit_hits_total{kind} (docs/hostile-peers.md).
enum class LimitHit : std::uint8_t {
  kHeaderTimeout,    // a frame / header block left half-sent past its deadline
  kBodyTimeout,      // a request message left half-sent past its deadline
  kWindowStall,      // a response held by the peer's zero window past the idle timeout
  kHalfClosed,       // peer FIN with requests not ended: those streams are reset
  kHpackExpansion,   // header block decoding to far more than its wire bytes
  kRejectedHeaders,  // too many 431 answers on one connection
  kFlood,            // nghttp2's flood guards (RST_STREAM rate, PING/SETTINGS floods)
};
inline constexpr std::size_t kLimitHitCount = 7;
// "header_timeout", "body_timeout", "window_stall", "half_closed",
// "hpack_expansion", "rejected_headers", "flood".
constexpr std::string_view to_label(LimitHit hit) {
  constexpr std::string_view kLabels[kLimitHitCount] = {
      "header_timeout",  "body_timeout",     "window_stall", "half_closed",
      "hpack_expansion", "rejected_headers", "flood"};
  return kLabels[static_cast<std::size_t>(hit)];
}

// A token bucket of the hostile-peer limits (rapid resets, PING/SETTINGS
// floods): `burst` tokens, refilled at `rate_per_s` by the connection
// watchdog's samples. Spending from an empty bucket marks it flooded.
struct TokenBucket {
  TokenBucket(double burst_tokens, double rate)
      : tokens(burst_tokens), burst(burst_tokens), rate_per_s(rate) {}

  // Spends one token; false (and `flooded`) when none is left.
  bool take() {
    if (tokens >= 1.0) {
      tokens -= 1.0;
      return true;
    }
    flooded = true;
    return false;
  }
  // Adds `seconds` × rate_per_s tokens, up to `burst`.
  void refill(double seconds) { tokens = std::min(burst, tokens + seconds * rate_per_s); }

  double tokens;
  double burst;
  double rate_per_s;
  bool flooded = false;
};

}  // namespace ic::h2
