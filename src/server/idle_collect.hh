#pragma once
// Hands a quiet core's free heap pages back to the system (the bounds it
// keeps: docs/replication.md "Applying the stream", docs/hostile-peers.md).
//
// mimalloc returns a thread's freed pages only when that thread uses its heap
// again. A reactor that freed a burst (ended stream subscribers' buffers, a
// replication burst's records) and then goes quiet would keep them resident
// for as long as it stays quiet. Each core counts its loop turns; a tick once
// a second looks at them. A tick is quiet when its turns fell to at most
// kQuietTurns or to 1/kQuietFraction of the busiest tick since the last
// collect (a core that keeps connections open still wakes for their timers,
// tens of turns a second); the first quiet tick after at least kBusyTurns busy
// turns runs mi_collect(true) on that core, once, until it is busy again. A
// steady load, light or heavy, never drops that far: no collect repeats.
// Cost: one turn hook (a counter) and one timer a second per core; the
// collect (a walk of the core's heap pages) only on a core that just went
// quiet.

#include <algorithm>
#include <cstdint>

#include "runtime/runtime.hh"

namespace ic::server {

// The decision alone (no reactor, no allocator): fed each tick's loop turns,
// says when to collect.
class QuietTicks {
 public:
  // Quiet: at most this many loop turns in one tick, or at most the busiest
  // tick's turns / kQuietFraction.
  static constexpr std::uint64_t kQuietTurns = 8;
  static constexpr std::uint64_t kQuietFraction = 16;
  // Busy enough since the last collect to collect again (loop turns).
  static constexpr std::uint64_t kBusyTurns = 64;

  // One tick with `turns` loop turns since the previous one; true = collect now.
  bool tick(std::uint64_t turns) {
    if (turns > std::max(kQuietTurns, peak_turns_ / kQuietFraction)) {
      busy_turns_ += turns;
      peak_turns_ = std::max(peak_turns_, turns);
      return false;
    }
    if (busy_turns_ < kBusyTurns) return false;
    busy_turns_ = 0;
    peak_turns_ = 0;
    return true;
  }

 private:
  std::uint64_t busy_turns_ = 0;  // since the last collect
  std::uint64_t peak_turns_ = 0;  // the busiest tick's turns since the last collect
};

class IdleCollect {
 public:
  // Tick interval (µs).
  static constexpr std::int64_t kTickUs = 1'000'000;

  // On `reactor`'s thread, once (its turn hook and first tick). `reactor`
  // outlives this object.
  void start(runtime::Reactor& reactor);
  // Collections run on this core so far (its thread).
  std::uint64_t collections() const { return collections_; }

 private:
  void tick();

  runtime::Reactor* reactor_ = nullptr;
  std::uint64_t turns_ = 0;
  std::uint64_t turns_at_tick_ = 0;
  QuietTicks quiet_;
  std::uint64_t collections_ = 0;
};

}  // namespace ic::server
