#include "metrics/process.hh"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "metrics/exposition.hh"

namespace ic::metrics {

namespace {

// /proc/self/stat fields 14, 15 (utime, stime in clock ticks), 23 (vsize,
// bytes), 24 (rss, pages); see proc(5). Field 2 (comm) may hold spaces, so
// parsing starts after its closing parenthesis.
void read_stat(ProcessStats& s) {
  std::FILE* file = std::fopen("/proc/self/stat", "re");
  if (file == nullptr) return;
  char buf[1024];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, file);
  std::fclose(file);
  buf[n] = '\0';
  const char* after_comm = std::strrchr(buf, ')');
  if (after_comm == nullptr) return;
  unsigned long long utime = 0, stime = 0, vsize = 0;
  long long rss = 0;
  // After ") ": state(3) then fields 4..13 skipped, 14 utime, 15 stime,
  // 16..22 skipped, 23 vsize, 24 rss.
  const int got = std::sscanf(after_comm + 1,
                              " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu"
                              " %*d %*d %*d %*d %*d %*d %*u %llu %lld",
                              &utime, &stime, &vsize, &rss);
  if (got != 4) return;
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks > 0) s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks);
  s.virtual_memory_bytes = static_cast<std::int64_t>(vsize);
  s.resident_memory_bytes = rss * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

std::int64_t count_open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  std::int64_t count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;  // the directory stream's own fd
}

}  // namespace

ProcessStats read_process_stats() {
  ProcessStats s;
  read_stat(s);
  s.open_fds = count_open_fds();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    s.max_fds = limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<std::int64_t>(limit.rlim_cur);
  }
  return s;
}

void render_process_collector(std::string& out, const ProcessStats& s, double start_time_seconds) {
  Writer w(out, "");
  w.single("process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.", s.cpu_seconds);
  w.single("process_open_fds", "gauge", "Number of open file descriptors.", s.open_fds);
  w.single("process_max_fds", "gauge", "Maximum number of open file descriptors.", s.max_fds);
  w.single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
           s.resident_memory_bytes);
  w.single("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
           s.virtual_memory_bytes);
  w.single("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.", start_time_seconds);
}

}  // namespace ic::metrics
