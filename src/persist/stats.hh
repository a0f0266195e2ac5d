#pragma once
// Figures of the --state-file warm restart (docs/persistence.md, docs/admin.md
// "Metrics"): written by the startup load (main thread) and the saver thread,
// read by scrapes on any core. Relaxed atomics: each figure stands alone.

#include <array>
#include <cstdint>
#include <string_view>

#include "metrics/group.hh"
#include "metrics/relaxed.hh"

namespace ic::persist {

using metrics::Relaxed;

// Outcome of the startup load, as load_status_name() spells it.
inline constexpr std::array<std::string_view, 6> kStateLoadResults = {
    "ok", "missing", "unreadable", "wrong_version", "truncated", "corrupt"};

// The figures; PersistStats::figures() copies them for one scrape.
struct PersistFigures {
  Relaxed<bool> enabled = false;               // --state-file given
  Relaxed<int> load_result = -1;               // index into kStateLoadResults; -1 = not loaded yet
  Relaxed<std::int64_t> restored_entries = 0;  // (key, replica) entries restored at startup
  Relaxed<std::uint64_t> saves_ok = 0;         // state files written
  Relaxed<std::uint64_t> saves_failed = 0;     // saves that failed (file kept as it was)
  Relaxed<double> last_save_unix_seconds = 0;  // completion time of the last good save; 0 = none
  Relaxed<double> last_save_duration_seconds = 0;
  Relaxed<std::int64_t> last_save_bytes = 0;
  Relaxed<std::int64_t> last_save_entries = 0;
};

class PersistStats {
 public:
  void set_enabled() { f_.enabled.store(true); }
  void record_load(int result, std::int64_t restored_entries) {
    f_.restored_entries.store(restored_entries);
    f_.load_result.store(result);
  }
  void record_save(bool ok, double unix_seconds, double duration_seconds, std::int64_t bytes,
                   std::int64_t entries) {
    if (!ok) {
      f_.saves_failed.add(1);
      return;
    }
    f_.last_save_unix_seconds.store(unix_seconds);
    f_.last_save_duration_seconds.store(duration_seconds);
    f_.last_save_bytes.store(bytes);
    f_.last_save_entries.store(entries);
    f_.saves_ok.add(1);
  }
  // Each figure read on its own (relaxed), as a scrape needs them.
  PersistFigures figures() const { return f_; }

 private:
  PersistFigures f_;
};

// The state_* families (docs/admin.md "Metrics"), read from `stats` at each
// scrape and shown only once set_enabled() ran (a server without
// --state-file has no such figures); `stats` must outlive the Registry.
metrics::Group metric_group(const PersistStats& stats);

}  // namespace ic::persist
