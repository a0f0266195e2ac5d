#include "index/clock.hh"

#include <ctime>

namespace ic::index {
namespace {
std::int64_t read_us(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}
}  // namespace

std::int64_t SystemClock::monotonic_us() { return read_us(CLOCK_MONOTONIC); }
std::int64_t SystemClock::wall_us() { return read_us(CLOCK_REALTIME); }

}  // namespace ic::index
