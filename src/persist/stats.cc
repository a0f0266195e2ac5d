#include "persist/stats.hh"

namespace ic::persist {

metrics::Group metric_group(const PersistStats& stats) {
  const PersistStats* s = &stats;
  using metrics::Writer;
  return metrics::Group{
      .name = "persist",
      .shown = [s] { return s->figures().enabled.load(); },
      .families = {
          {"state_loads_total", "counter",
           "Startup loads of --state-file by result (ok, missing, unreadable, wrong_version, "
           "truncated, corrupt); anything but ok starts the index cold.",
           [s](Writer& w, std::string_view name) {
             const int result = s->figures().load_result;
             if (result < 0) return;  // not loaded yet
             w.sample(name, {{"result", kStateLoadResults[static_cast<std::size_t>(result)]}}, 1);
           }},
          metrics::single("state_restored_entries", "gauge",
                          "(key, replica) entries restored from --state-file at startup.",
                          [s] { return s->figures().restored_entries.load(); }),
          {"state_saves_total", "counter", "State file saves by result (ok, error).",
           [s](Writer& w, std::string_view name) {
             const PersistFigures f = s->figures();
             w.sample(name, {{"result", "ok"}}, f.saves_ok.load());
             w.sample(name, {{"result", "error"}}, f.saves_failed.load());
           }},
          metrics::single("state_last_save_timestamp_seconds", "gauge",
                          "Unix time the last good state file was written; 0 = none yet.",
                          [s] { return s->figures().last_save_unix_seconds.load(); }),
          metrics::single("state_last_save_duration_seconds", "gauge",
                          "Wall time of the last good save, from the first slice to the rename.",
                          [s] { return s->figures().last_save_duration_seconds.load(); }),
          metrics::single("state_last_save_bytes", "gauge",
                          "Size of the last good state file in bytes.",
                          [s] { return s->figures().last_save_bytes.load(); }),
          metrics::single("state_last_save_entries", "gauge",
                          "(key, replica) entries in the last good state file.",
                          [s] { return s->figures().last_save_entries.load(); }),
      }};
}

}  // namespace ic::persist
