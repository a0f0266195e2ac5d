#pragma once
// Owns one CoreMetrics per core and the few process-wide gauges. Built once by
// the composition root (src/main.cc) before the runtime starts; each reactor
// thread calls bind_current_thread(core) in its on_start hook so that
// metrics::local() reaches its own core's registry without any lookup.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "metrics/core_metrics.hh"
#include "metrics/group.hh"
#include "metrics/sample.hh"

namespace ic::metrics {

class Registry {
 public:
  // `cores` = the runtime's core count (≥ 1).
  explicit Registry(unsigned cores);
  // Unbinds the calling thread if it was bound to one of its cores (tests
  // bind their own thread; a later local() must not reach a freed core).
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  unsigned cores() const { return static_cast<unsigned>(cores_.size()); }
  // The registry of `core`; only that core's thread may write or collect it.
  CoreMetrics& core(unsigned core) { return *cores_.at(core); }

  // Makes metrics::local() on the calling thread return core(core).
  void bind_current_thread(unsigned core);

  // inferencecache_server_up: set true once listeners serve, false when
  // shutdown starts. Any thread (relaxed atomic; written rarely).
  void set_server_up(bool up) { server_up_.store(up, std::memory_order_relaxed); }
  // inferencecache_server_grpc_tls_enabled; set once at startup.
  void set_grpc_tls_enabled(bool on) { tls_.store(on, std::memory_order_relaxed); }

  // Registers a subsystem's process-wide families (metrics/group.hh),
  // rendered after the process families in registration order. Before the
  // runtime starts; whatever `group` reads must outlive the Registry.
  void add_group(Group group) { registered_.groups.push_back(std::move(group)); }
  // Registers a per-core counter family: every core gets one zeroed counter
  // per label value; count with CoreMetrics::add(returned id, value index).
  // Rendered after the connection families in registration order. Before
  // the runtime starts.
  CounterFamilyId add_counter_family(CounterFamily family);
  // Registers a per-core family of the subsystem's type T (metrics/group.hh
  // CoreFamilyOf: T merges and renders itself): every core gets a zeroed T,
  // reached with CoreMetrics::family(returned id); rendered after `after`.
  // Before the runtime starts.
  template <typename T>
  CoreFamilyId<T> add_core_family(RenderAfter after) {
    const CoreFamilyId<T> id{.index = static_cast<std::uint32_t>(registered_.core_families.size())};
    CoreFamily family{.after = after, .make = [] { return std::make_unique<CoreFamilyOf<T>>(); }};
    for (auto& core : cores_) core->add_family(family.make());
    registered_.core_families.push_back(std::move(family));
    return id;
  }
  // What the add_* calls registered, for the renderer.
  const Registrations& registrations() const { return registered_; }

  // Reads the process-wide gauges and RSS now (one small /proc read).
  ProcessFigures process_figures() const;

  // Fills process-wide values into the merged sample of every scrape, on the
  // scraping core (e.g. open/accepted connections from the net layer's
  // atomic ListenerStats, which are not per core). Set before the runtime
  // starts; `fn` must be safe to call from any reactor thread.
  using GlobalCollector = std::function<void(Sample& merged)>;
  void set_global_collector(GlobalCollector fn) { global_collector_ = std::move(fn); }
  // Runs the global collector (if any) on `merged`.
  void collect_global(Sample& merged) const {
    if (global_collector_) global_collector_(merged);
  }

 private:
  std::vector<std::unique_ptr<CoreMetrics>> cores_;
  std::atomic<bool> server_up_{false};
  std::atomic<bool> tls_{false};
  double start_time_seconds_;
  Registrations registered_;
  std::size_t counters_ = 0;  // registered per-core counters so far
  GlobalCollector global_collector_;
};

// The calling thread's core registry (bound by Registry::bind_current_thread).
// A thread that is no core (not a reactor: unit tests, tools, helper threads)
// gets a thread-local scratch registry whose values are never scraped. A
// reactor thread must be bound (checked: aborts otherwise).
CoreMetrics& local();

// Resident set size of this process in bytes (/proc/self/statm field 2 ×
// page size); 0 if it cannot be read.
std::int64_t resident_memory_bytes();

}  // namespace ic::metrics
