#pragma once
// The per-connection spread of --max-connection-age (ListenerOptions::
// max_connection_age_us), so a fleet's connections do not all get GOAWAY at once.

#include <cstdint>

namespace ic::net {

// `age_us` (µs, ≥ 0) moved by up to ±10 % (spread = age_us / 10, integer µs):
// age_us - spread + random % (2 * spread + 1), so every value of
// [age_us - spread, age_us + spread] is reachable. `random` is any 64-bit draw
// (next_age_draw() in the server, fixed values in tests). age_us below 10
// has no spread and is returned as is.
std::int64_t jittered(std::int64_t age_us, std::uint64_t random);

// A 64-bit draw from this thread's splitmix64 sequence (seeded from the
// thread's address): a different jitter per connection on one core.
std::uint64_t next_age_draw();

}  // namespace ic::net
