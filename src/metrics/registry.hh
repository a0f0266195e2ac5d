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
#include "metrics/sample.hh"

namespace ic::metrics {

class Registry {
 public:
  // `cores` = the runtime's core count (≥ 1).
  explicit Registry(unsigned cores);
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

  // Warm-restart figures (--state-file); any thread.
  PersistStats& persist() { return persist_; }
  // NATS JetStream replication figures (--nats-url); any thread.
  ReplicationStats& replication() { return replication_; }

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
  PersistStats persist_;
  ReplicationStats replication_;
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
