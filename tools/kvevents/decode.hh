// msgpack payload → Batch (docs/kvevents.md "What it accepts on the wire"). Liberal in what it
// accepts: array or map batches, array or map events decided per event, uint64 / negative int64 /
// bin hashes, trailing fields missing or extra. A malformed event is skipped and counted; a
// malformed batch is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvevents/event.hh"

namespace ic::tools::kvevents {

// Largest payload decoded, bytes; bigger payloads are malformed batches (bounded memory).
inline constexpr std::size_t kMaxPayloadBytes = 64u << 20;

struct DecodeResult {
  std::optional<Batch> batch;  // set on success
  std::string error;           // why the whole batch was skipped, when batch is empty
};

// Decodes one payload (the third frame of a live message or replay reply).
DecodeResult decode_batch(std::string_view payload);

// A block hash in any wire form → one 64-bit key: uint64 as is, a negative int64 as its two's
// complement, bin as its last 8 bytes big-endian (shorter bin: all bytes, big-endian).
// Exposed for tests; nullopt for any other msgpack type.
std::optional<std::uint64_t> normalise_hash_bytes(std::string_view bin);

}  // namespace ic::tools::kvevents
