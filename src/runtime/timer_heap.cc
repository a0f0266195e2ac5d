#include "runtime/timer_heap.hh"

#include <algorithm>

namespace ic::runtime {

TimerHeap::Id TimerHeap::add(std::int64_t deadline_us, Task task) {
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.task = std::move(task);
  s.armed = true;
  const Id id = (std::uint64_t{s.generation} << 32) | slot;
  heap_.push_back(Entry{deadline_us, seq_++, id});
  std::push_heap(heap_.begin(), heap_.end(), later);
  ++live_;
  // Cancelled entries stay in the heap until they surface; rebuild when they
  // outnumber live ones so a cancel-heavy load (per-call deadlines) stays bounded.
  if (heap_.size() > 1024 && heap_.size() > 4 * live_) compact();
  return id;
}

bool TimerHeap::live(const Entry& e) const {
  const auto slot = static_cast<std::uint32_t>(e.id);
  const auto gen = static_cast<std::uint32_t>(e.id >> 32);
  return slot < slots_.size() && slots_[slot].armed && slots_[slot].generation == gen;
}

void TimerHeap::release(std::uint32_t slot) {
  Slot& s = slots_[slot];
  s.armed = false;
  ++s.generation;
  if (s.generation == 0) s.generation = 1;  // keep ids non-zero
  free_.push_back(slot);
  --live_;
}

bool TimerHeap::cancel(Id id) {
  const Entry probe{0, 0, id};
  if (!live(probe)) return false;
  const auto slot = static_cast<std::uint32_t>(id);
  Task dropped = std::move(slots_[slot].task);
  release(slot);
  return true;
}

void TimerHeap::drop_stale_top() {
  while (!heap_.empty() && !live(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }
}

void TimerHeap::compact() {
  std::erase_if(heap_, [this](const Entry& e) { return !live(e); });
  std::make_heap(heap_.begin(), heap_.end(), later);
}

std::optional<std::int64_t> TimerHeap::next_deadline() {
  drop_stale_top();
  if (heap_.empty()) return std::nullopt;
  return heap_.front().deadline_us;
}

Task TimerHeap::pop_due(std::int64_t now_us) {
  drop_stale_top();
  if (heap_.empty() || heap_.front().deadline_us > now_us) return Task{};
  const Entry top = heap_.front();
  std::pop_heap(heap_.begin(), heap_.end(), later);
  heap_.pop_back();
  const auto slot = static_cast<std::uint32_t>(top.id);
  Task task = std::move(slots_[slot].task);
  release(slot);
  return task;
}

}  // namespace ic::runtime
