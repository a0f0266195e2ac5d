#include "metrics/registry.hh"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "base/check.hh"
#include "runtime/runtime.hh"

namespace ic::metrics {

namespace {
thread_local CoreMetrics* bound_core = nullptr;

}  // namespace

Registry::Registry(unsigned cores)
    : start_time_seconds_(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()) {
  cores_.reserve(cores == 0 ? 1 : cores);
  for (unsigned core = 0; core < (cores == 0 ? 1 : cores); ++core) {
    cores_.push_back(std::make_unique<CoreMetrics>(core));
  }
}

Registry::~Registry() {
  for (const auto& core : cores_) {
    if (bound_core == core.get()) bound_core = nullptr;
  }
}

void Registry::bind_current_thread(unsigned core) { bound_core = &this->core(core); }

ProcessFigures Registry::process_figures() const {
  return ProcessFigures{
      .server_up = server_up_.load(std::memory_order_relaxed),
      .grpc_tls_enabled = tls_.load(std::memory_order_relaxed),
      .resident_memory_bytes = resident_memory_bytes(),
      .start_time_seconds = start_time_seconds_,
      .build = buildinfo::build_info(),
      .stats = read_process_stats(),
  };
}

CounterFamilyId Registry::add_counter_family(CounterFamily family) {
  const CounterFamilyId id{.first = static_cast<std::uint32_t>(counters_),
                           .size = static_cast<std::uint32_t>(family.values.size())};
  counters_ += family.values.size();
  for (auto& core : cores_) core->reserve_counters(counters_);
  registered_.counter_families.push_back(std::move(family));
  return id;
}

CoreMetrics& local() {
  if (bound_core != nullptr) return *bound_core;
  // A reactor thread is a core: its counts must reach its registry, or a
  // scrape would silently miss them.
  IC_CHECK(!runtime::on_reactor_thread(),
           "metrics::local() on a reactor thread its Registry was not bound to");
  thread_local CoreMetrics scratch(0);
  return scratch;
}

std::int64_t resident_memory_bytes() {
  // statm is a one-line procfs file served from memory: reading it does not
  // block on I/O, so a reactor may do it once per scrape.
  std::FILE* file = std::fopen("/proc/self/statm", "re");
  if (file == nullptr) return 0;
  long long size_pages = 0;
  long long resident_pages = 0;
  const int fields = std::fscanf(file, "%lld %lld", &size_pages, &resident_pages);
  std::fclose(file);
  if (fields != 2) return 0;
  return resident_pages * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace ic::metrics
