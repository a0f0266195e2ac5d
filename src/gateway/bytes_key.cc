#include "gateway/bytes_key.hh"

#if defined(__x86_64__)
// Only the *_dispatch names, not its macros replacing XXH3_* everywhere.
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif

namespace ic::gateway {

XXH128_hash_t bytes_key(std::string_view bytes) {
#if defined(__x86_64__)
  return XXH3_128bits_dispatch(bytes.data(), bytes.size());
#else
  return XXH3_128bits(bytes.data(), bytes.size());
#endif
}

}  // namespace ic::gateway
