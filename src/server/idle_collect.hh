#pragma once
// Hands a quiet core's free heap pages back to the system (the bounds it
// keeps: docs/replication.md "Applying the stream", docs/hostile-peers.md).
//
// mimalloc returns a thread's freed pages only when that thread uses its heap
// again. A reactor that freed a burst (ended stream subscribers' buffers, a
// replication burst's records) and then goes quiet would keep them resident
// for as long as it stays quiet. A tick once a second reads the core's CPU
// time (CLOCK_THREAD_CPUTIME_ID, the reactor's own thread). A tick is quiet
// when the core used at most kQuietCpuUs of CPU in it, or at most
// 1/kQuietFraction of its busiest tick since the last collect (kept
// connections still wake it for their timers); the first quiet tick after at
// least kBusyCpuUs of busy ticks runs mi_collect(true) on that core, once,
// until it is busy again. CPU time, not loop turns: a turn may handle one
// completion or thousands (a fast machine finished a whole burst in fewer
// turns than the old turn threshold, and never collected), while the work a
// burst costs shows in CPU time however it was batched. A steady load,
// light or heavy, never drops that far: no collect repeats. Cost: one
// clock_gettime and one timer a second per core; the collect (a walk of the
// core's heap pages) only on a core that just went quiet.

#include <algorithm>
#include <cstdint>

#include "runtime/runtime.hh"

namespace ic::server {

// The decision alone (no reactor, no allocator): fed each tick's CPU time,
// says when to collect.
class QuietTicks {
 public:
  // Quiet: at most this much CPU in one tick (µs; 0.5 % of a core), or at
  // most the busiest tick's CPU / kQuietFraction.
  static constexpr std::uint64_t kQuietCpuUs = 5'000;
  static constexpr std::uint64_t kQuietFraction = 16;
  // Busy enough since the last collect to collect again (µs of CPU in busy
  // ticks): a burst worth handing back.
  static constexpr std::uint64_t kBusyCpuUs = 20'000;

  // One tick whose core used `cpu_us` µs of CPU since the previous one;
  // true = collect now.
  bool tick(std::uint64_t cpu_us) {
    if (cpu_us > std::max(kQuietCpuUs, peak_cpu_us_ / kQuietFraction)) {
      busy_cpu_us_ += cpu_us;
      peak_cpu_us_ = std::max(peak_cpu_us_, cpu_us);
      return false;
    }
    if (busy_cpu_us_ < kBusyCpuUs) return false;
    busy_cpu_us_ = 0;
    peak_cpu_us_ = 0;
    return true;
  }

 private:
  std::uint64_t busy_cpu_us_ = 0;  // since the last collect
  std::uint64_t peak_cpu_us_ = 0;  // the busiest tick's CPU since the last collect
};

class IdleCollect {
 public:
  // Tick interval (µs).
  static constexpr std::int64_t kTickUs = 1'000'000;

  // On `reactor`'s thread, once (its first tick). `reactor` outlives this
  // object.
  void start(runtime::Reactor& reactor);
  // Collections run on this core so far (its thread).
  std::uint64_t collections() const { return collections_; }

 private:
  void tick();

  runtime::Reactor* reactor_ = nullptr;
  std::uint64_t cpu_us_at_tick_ = 0;
  QuietTicks quiet_;
  std::uint64_t collections_ = 0;
};

}  // namespace ic::server
