#pragma once
// The standard Prometheus process collector families
// (https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics):
// process_cpu_seconds_total, process_open_fds, process_max_fds,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, with the names every client library uses so
// stock dashboards and alerts work.

#include <cstdint>
#include <string>

namespace ic::metrics {

// One reading of this process from procfs.
struct ProcessStats {
  double cpu_seconds = 0;                  // user + system CPU time, s
  std::int64_t open_fds = 0;               // entries of /proc/self/fd
  std::int64_t max_fds = 0;                // RLIMIT_NOFILE soft limit
  std::int64_t resident_memory_bytes = 0;  // RSS, bytes
  std::int64_t virtual_memory_bytes = 0;   // VmSize, bytes
};

// Reads /proc/self/stat, /proc/self/fd and the NOFILE limit. procfs is served
// from memory (no disk I/O), so a reactor may call this once per scrape.
// Fields that cannot be read stay 0.
ProcessStats read_process_stats();

// Appends the six families (unprefixed) to `out`; `start_time_seconds` is
// Unix time.
void render_process_collector(std::string& out, const ProcessStats& stats,
                              double start_time_seconds);

}  // namespace ic::metrics
