#pragma once
// The work-aware ranking's soft state of one scope (docs/ranking.md "Bookings"):
// what each replica has been booked and how fast it prefills. Lives in the
// scope's record on the tenant's owner core; never persisted, replicated,
// exported or reported as stored (bookings are not entries).

#include <cstdint>
#include <vector>

#include "index/detail/interner.hh"

namespace ic::index::detail {

// What a scope knows of one replica's prefill queue (bookings.cc).
struct ReplicaWork {
  std::uint32_t replica = kNone;  // holds an interner reference
  std::int64_t busy_until = 0;    // wall µs when its booked prefill work is estimated done
  std::int64_t last_done = 0;     // wall µs of its last report of new blocks; 0 = none
  std::int64_t last_active = 0;   // wall µs of its last booking or report (forgetting)
  double rate = 0;                // learned prefill tokens/s; 0 = none yet (the knob's)
  double sample_tokens = 0;       // decayed Σ tokens of its completed bookings
  double sample_us = 0;           // decayed Σ of their prefill times, µs
  double latency_us = 0;          // decayed mean booking → completion, µs; 0 = none yet
  std::uint32_t open = 0;         // open bookings
  std::int64_t open_tokens = 0;   // their tokens
  std::uint32_t decode_open = 0;  // LookupPDRoute: open decode bookings (slots taken)
  // LookupPDRoute: their estimated starts (DecodeBooking::starts_at), sorted,
  // so a lookup counts those after a time by binary search.
  std::vector<std::int64_t> decode_starts;
  // Requests its last counted pressure had beyond its bookings (settle_count),
  // less the displaced bookings placed on it since: work the gateway sent
  // there without a booking.
  std::int64_t unbooked = 0;
  // Predicted vs delivered (docs/ranking.md): hints naming it on top, Σ of the hit
  // tokens they predicted, and how its bookings ended.
  std::uint64_t hints = 0;
  std::uint64_t hinted_tokens = 0;  // Σ their prompt tokens
  std::uint64_t predicted_hit_tokens = 0;
  std::uint64_t completed = 0;  // ended by the engine's report of the booked blocks
  std::uint64_t expired = 0;    // ended by the bound, or overtaken by a later completion
};

// One answered hint's booking: its uncached tokens on `replica`, and the
// request's blocks as speculative entries there until it ends.
struct Booking {
  std::uint32_t replica = kNone;  // kNone = a free slot
  bool chain = false;             // `blocks` are a chain's (else the one exact key)
  bool done = false;              // the replica reported its last block (ingest, settled after)
  bool prefilled = false;         // the gateway saw its first response byte (feedback.cc)
  // Its replica's counted pressure left it out (settle_count): the gateway sent
  // it elsewhere. Its tokens are on no replica's queue and its blocks are no
  // speculative entries (unlinked) until a replica counting unbooked requests
  // takes it (place_displaced); it still ends on a report of its blocks or its bound.
  bool displaced = false;
  std::uint64_t seq = 0;        // booking order, unique in the shard (1, 2, …)
  std::int64_t booked_at = 0;   // wall µs
  std::int64_t expires_at = 0;  // wall µs: the bound
  std::int64_t tokens = 0;      // uncached prompt tokens booked (0 once prefilled)
  std::int64_t prompt = 0;      // the request's effective prompt tokens (a move re-prices)
  // Key hashes (Shard::Impl::group_hash) of the request's blocks, or of its
  // exact key; at most kMaxBookedBlocks. The vector's capacity is kept when
  // the slot is reused.
  std::vector<std::uint64_t> blocks;
  // Its bucket in WorkState::heads (by blocks[0]): the next and previous slot
  // there, kNone = none. Linked while the booking is live and has blocks.
  std::uint32_t next_same = kNone;
  std::uint32_t prev_same = kNone;
};

// One LookupPDRoute answer's decode slot on `replica` (docs/pd-routing.md
// "Decode load"): held until an event of the replica frees the request's KV
// (its last booked block evicted, or ALL_CLEARED) or until `expires_at`.
struct DecodeBooking {
  std::uint32_t replica = kNone;  // kNone = a free slot
  std::int64_t starts_at = 0;     // wall µs: the answer + the prefill's estimated wait
  std::int64_t expires_at = 0;    // wall µs: starts_at + decodeHoldMs
  std::uint64_t key = 0;          // key hash of the request's last booked block
};

// The bookings of one scope and its replicas' work records.
struct WorkState {
  std::vector<ReplicaWork> replicas;  // unsorted; few per scope
  std::vector<Booking> bookings;      // slots; replica == kNone is free
  std::uint32_t live = 0;             // bookings in use
  // The live bookings by their first block's key: bucket heads (slots, kNone =
  // empty), a power of two ≥ 2 × bookings.size(), so a lookup visits only the
  // bookings that share its first block, not every slot (bookings.cc).
  std::vector<std::uint32_t> heads;
  std::int64_t next_expiry = INT64_MAX;         // wall µs: no booking ends by its bound before
  std::vector<DecodeBooking> decodes;           // slots; replica == kNone is free
  std::uint32_t decodes_live = 0;               // decode bookings in use
  std::int64_t next_decode_expiry = INT64_MAX;  // wall µs: no decode booking ends by time before
  // Discovery without stats (work_ranking.cc take_probe): when the last
  // NO_HINT probe was answered (wall µs; INT64_MIN = never) and how many
  // replicas the scope knew then.
  std::int64_t probe_at = INT64_MIN;
  std::uint32_t known_at_probe = 0;
  // Probes the scope may answer beyond one per discovery window: earned by
  // the replicas found since the first probe, at most the replicas known.
  std::uint32_t probe_budget = 0;
  // The known replicas when the budget last grew, or fewer when the count fell
  // since (a high-water mark that follows the count down).
  std::uint32_t known_found = 0;
  // Probes in a row that found no new replica: each doubles the discovery
  // window (work_ranking.cc discovery_window); a growth of the known replicas
  // resets it.
  std::uint32_t fruitless_probes = 0;
  // The rate of a replica the scope has not timed yet (bookings.cc prior_rate):
  // the mean learned rate of its replicas, tokens/s; 0 = none learned (the knob's).
  double prior_rate = 0;
  // The decayed mean of its bookings' tokens (window 64): the work of a
  // request a replica counts without a booking (settle_count); 0 = none yet.
  double mean_booking_tokens = 0;

  // The first slot of `key`'s bucket, kNone when empty; the rest follow
  // Booking::next_same. Its bookings may have other first keys (compare blocks[0]).
  std::uint32_t first_of(std::uint64_t key) const {
    return heads.empty() ? kNone : heads[key & (heads.size() - 1)];
  }
};

}  // namespace ic::index::detail
