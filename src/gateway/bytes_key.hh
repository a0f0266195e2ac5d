#pragma once
// The key of the gateway's per-core caches (message_cache.hh,
// segment_tokens.hh): XXH3-128 of a byte string. A next turn hashes every
// earlier message and every rendered run again (about 1 MB at 100k tokens),
// so on x86-64 it goes through xxhash's runtime dispatch (xxh_x86dispatch.h:
// AVX2 / AVX-512 when the CPU has them, SSE2 otherwise), which gives the
// same value as XXH3_128bits (xxhash's README, "x86 dispatcher").

#include <xxhash.h>

#include <string_view>

namespace ic::gateway {

XXH128_hash_t bytes_key(std::string_view bytes);

}  // namespace ic::gateway
