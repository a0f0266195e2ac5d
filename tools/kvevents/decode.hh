// msgpack payload → Batch (docs/kvevents.md "What it accepts on the wire"). Liberal in what it
// accepts: array or map batches, array or map events decided per event, uint64 / negative int64 /
// bin hashes, trailing fields missing or extra. A malformed event is skipped and counted; a
// malformed batch is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// Events handed over at a time by decode_batch_chunks (docs/kvevents.md "Bounds").
inline constexpr std::size_t kChunkEvents = 4096;

// Decodes one payload (the third frame of a live message or replay reply) into one Batch: all of
// its events at once (tests and small batches; the adapter uses decode_batch_chunks).
DecodeResult decode_batch(std::string_view payload);

// Decodes one payload and hands its events to `apply` in order, at most `chunk_events` per call:
// each chunk is a Batch with the batch's ts and dp_rank, its share of the events and the
// malformed and unknown events skipped since the previous chunk (the last call may have no
// events). The whole payload is checked first (one msgpack object within the unpack limits,
// nothing after it, the batch's shape), so a malformed batch returns its error and `apply` is
// never called. Memory beyond the payload: one event's msgpack objects and one chunk, whatever
// the batch's size. Returns "" or why the batch was skipped.
std::string decode_batch_chunks(std::string_view payload, std::size_t chunk_events,
                                const std::function<void(const Batch&)>& apply);

// A block hash in any wire form → one 64-bit key: uint64 as is, a negative int64 as its two's
// complement, bin as its last 8 bytes big-endian (shorter bin: all bytes, big-endian).
// Exposed for tests; nullopt for any other msgpack type.
std::optional<std::uint64_t> normalise_hash_bytes(std::string_view bin);

}  // namespace ic::tools::kvevents
