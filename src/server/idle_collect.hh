#pragma once
// Hands a quiet core's free heap pages back to the system (the bounds it
// keeps: docs/replication.md "Applying the stream", docs/hostile-peers.md).
//
// mimalloc returns a thread's freed pages only when that thread uses its heap
// again. A reactor that freed a burst (ended stream subscribers' buffers, a
// replication burst's records) and then goes quiet would keep them resident
// for as long as it stays quiet. Each core counts its loop turns; a tick once
// a second looks at them, and the first quiet second (at most kQuietTurns
// turns: the tick's own, the index sweep's) after at least kBusyTurns busy
// turns runs mi_collect(true) on that core, once, until it is busy again.
// Cost: one turn hook (a counter) and one timer a second per core; the
// collect itself only on a core with nothing else to do.

#include <cstdint>

#include "runtime/runtime.hh"

namespace ic::server {

class IdleCollect {
 public:
  // Quiet: at most this many loop turns in one tick.
  static constexpr std::uint64_t kQuietTurns = 8;
  // Busy enough since the last collect to collect again (loop turns).
  static constexpr std::uint64_t kBusyTurns = 64;
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
  std::uint64_t busy_turns_ = 0;  // since the last collect
  std::uint64_t collections_ = 0;
};

}  // namespace ic::server
