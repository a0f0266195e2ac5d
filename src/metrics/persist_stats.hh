#pragma once
// Figures of the --state-file warm restart (docs/persistence.md, docs/admin.md
// "Metrics"): written by the startup load (main thread) and the saver thread,
// read by scrapes on any core. Relaxed atomics: each figure stands alone.

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace ic::metrics {

// Outcome of the startup load, as persist::load_status_name() spells it.
inline constexpr std::array<std::string_view, 6> kStateLoadResults = {
    "ok", "missing", "unreadable", "wrong_version", "truncated", "corrupt"};

// Plain copy for one scrape.
struct PersistFigures {
  bool enabled = false;               // --state-file given
  int load_result = -1;               // index into kStateLoadResults; -1 = not loaded yet
  std::int64_t restored_entries = 0;  // (key, replica) entries restored at startup
  std::uint64_t saves_ok = 0;         // state files written
  std::uint64_t saves_failed = 0;     // saves that failed (file kept as it was)
  double last_save_unix_seconds = 0;  // completion time of the last good save; 0 = none
  double last_save_duration_seconds = 0;
  std::int64_t last_save_bytes = 0;
  std::int64_t last_save_entries = 0;
};

class PersistStats {
 public:
  void set_enabled() { enabled_.store(true, std::memory_order_relaxed); }
  void record_load(int result, std::int64_t restored_entries) {
    restored_.store(restored_entries, std::memory_order_relaxed);
    load_result_.store(result, std::memory_order_relaxed);
  }
  void record_save(bool ok, double unix_seconds, double duration_seconds, std::int64_t bytes,
                   std::int64_t entries) {
    if (!ok) {
      saves_failed_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    last_unix_.store(unix_seconds, std::memory_order_relaxed);
    last_duration_.store(duration_seconds, std::memory_order_relaxed);
    last_bytes_.store(bytes, std::memory_order_relaxed);
    last_entries_.store(entries, std::memory_order_relaxed);
    saves_ok_.fetch_add(1, std::memory_order_relaxed);
  }
  PersistFigures figures() const {
    return PersistFigures{
        .enabled = enabled_.load(std::memory_order_relaxed),
        .load_result = load_result_.load(std::memory_order_relaxed),
        .restored_entries = restored_.load(std::memory_order_relaxed),
        .saves_ok = saves_ok_.load(std::memory_order_relaxed),
        .saves_failed = saves_failed_.load(std::memory_order_relaxed),
        .last_save_unix_seconds = last_unix_.load(std::memory_order_relaxed),
        .last_save_duration_seconds = last_duration_.load(std::memory_order_relaxed),
        .last_save_bytes = last_bytes_.load(std::memory_order_relaxed),
        .last_save_entries = last_entries_.load(std::memory_order_relaxed),
    };
  }

 private:
  std::atomic<bool> enabled_{false};
  std::atomic<int> load_result_{-1};
  std::atomic<std::int64_t> restored_{0};
  std::atomic<std::uint64_t> saves_ok_{0};
  std::atomic<std::uint64_t> saves_failed_{0};
  std::atomic<double> last_unix_{0};
  std::atomic<double> last_duration_{0};
  std::atomic<std::int64_t> last_bytes_{0};
  std::atomic<std::int64_t> last_entries_{0};
};

}  // namespace ic::metrics
