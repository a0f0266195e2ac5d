#pragma once
// GET /readyz state (docs/admin.md "Listeners"): ready once every core serves,
// not ready again once shutdown starts ("draining": the admin listeners keep
// answering while gRPC drains). Written on start/stop, read per probe.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace ic::admin {

class Readiness {
 public:
  // `cores` = the runtime's core count.
  explicit Readiness(unsigned cores);

  // Core `core` has its services and listeners up. Any thread; idempotent.
  void core_serving(unsigned core);
  // Shutdown began: ready() is false from now on. Any thread.
  void set_draining() { draining_.store(true, std::memory_order_relaxed); }
  // Replication is catching up with its stream (docs/replication.md
  // "Readiness"): ready() is false while set. Any thread.
  void set_catching_up(bool on) { catching_up_.store(on, std::memory_order_relaxed); }
  // True once set_draining() was called.
  bool draining() const { return draining_.load(std::memory_order_relaxed); }
  // True when every core called core_serving(), no catch-up is pending and
  // draining has not begun.
  bool ready() const;

 private:
  std::unique_ptr<std::atomic<bool>[]> serving_;
  unsigned cores_;
  std::atomic<unsigned> count_{0};
  std::atomic<bool> draining_{false};
  std::atomic<bool> catching_up_{false};
};

}  // namespace ic::admin
