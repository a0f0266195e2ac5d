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
  // True once set_draining() was called.
  bool draining() const { return draining_.load(std::memory_order_relaxed); }
  // True when every core called core_serving() and draining has not begun.
  bool ready() const;

 private:
  std::unique_ptr<std::atomic<bool>[]> serving_;
  unsigned cores_;
  std::atomic<unsigned> count_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace ic::admin
