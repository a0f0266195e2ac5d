#include "net/age_jitter.hh"

#include <cstdint>

namespace ic::net {

std::int64_t jittered(std::int64_t age_us, std::uint64_t random) {
  const std::int64_t spread = age_us / 10;
  if (spread <= 0) return age_us;
  return age_us - spread +
         static_cast<std::int64_t>(random % static_cast<std::uint64_t>(2 * spread + 1));
}

std::uint64_t next_age_draw() {
  thread_local std::uint64_t state =
      static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&state)) ^ 0x9E3779B97F4A7C15u;
  std::uint64_t z = (state += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

}  // namespace ic::net
