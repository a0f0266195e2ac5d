#include "server/idle_collect.hh"

#include <mimalloc.h>
#include <time.h>

namespace ic::server {
namespace {

// CPU time of the calling thread (µs): the reactor's own, not its neighbours'.
std::uint64_t thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000 +
         static_cast<std::uint64_t>(ts.tv_nsec) / 1'000;
}

}  // namespace

void IdleCollect::start(runtime::Reactor& reactor) {
  reactor_ = &reactor;
  cpu_us_at_tick_ = thread_cpu_us();
  reactor.add_timer(kTickUs, [this] { tick(); });
}

void IdleCollect::tick() {
  const std::uint64_t now = thread_cpu_us();
  const std::uint64_t cpu_us = now - cpu_us_at_tick_;
  cpu_us_at_tick_ = now;
  if (quiet_.tick(cpu_us)) {
    mi_collect(true);
    ++collections_;
    cpu_us_at_tick_ = thread_cpu_us();  // the collect's own work is not the next tick's load
  }
  reactor_->add_timer(kTickUs, [this] { tick(); });
}

}  // namespace ic::server
