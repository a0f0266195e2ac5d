#include "admin/readiness.hh"

namespace ic::admin {

Readiness::Readiness(unsigned cores)
    : serving_(std::make_unique<std::atomic<bool>[]>(cores == 0 ? 1 : cores)),
      cores_(cores == 0 ? 1 : cores) {}

void Readiness::core_serving(unsigned core) {
  if (core >= cores_) return;
  if (!serving_[core].exchange(true, std::memory_order_relaxed)) {
    count_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool Readiness::ready() const {
  return !draining_.load(std::memory_order_relaxed) &&
         !catching_up_.load(std::memory_order_relaxed) &&
         count_.load(std::memory_order_relaxed) == cores_;
}

}  // namespace ic::admin
