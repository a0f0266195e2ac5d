#include "replication/echo_filter.hh"

#include <algorithm>

namespace ic::replication {

bool EchoFilter::early_apply(std::string_view tenant, std::uint64_t sequence) {
  if (early_echoes_.erase(sequence) > 0) return false;
  if (waiting_.size() >= kMaxWaiting) {
    waiting_.clear();
    tenants_.clear();
  }
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) it = tenants_.emplace(std::string(tenant), Tenant{}).first;
  Tenant& t = it->second;
  ++t.waiting;
  waiting_[sequence] = Waiting{&*it, next_order_++, t.applies, all_applies_};
  return true;
}

bool EchoFilter::stream_record(std::string_view tenant, std::uint64_t own_sequence) {
  if (own_sequence != 0) {
    const auto it = waiting_.find(own_sequence);
    if (it == waiting_.end()) {
      if (early_echoes_.size() >= kMaxEarlyEchoes) early_echoes_.clear();
      early_echoes_.insert(own_sequence);
    } else if (clean(it->second)) {
      // Skipped: own records applied early before this one now follow it.
      Tenant& t = it->second.tenant->second;
      t.dirty_below = std::max(t.dirty_below, it->second.order);
      forget(it);
      return false;
    } else {
      forget(it);
    }
  }
  applied(tenant);
  return true;
}

bool EchoFilter::clean(const Waiting& w) const {
  const Tenant& t = w.tenant->second;
  return w.applies == t.applies && w.all_applies == all_applies_ && w.order >= t.dirty_below;
}

void EchoFilter::forget(std::unordered_map<std::uint64_t, Waiting>::iterator it) {
  Tenants::value_type* t = it->second.tenant;
  waiting_.erase(it);
  // No record of the tenant waits: its counters matter no more.
  if (--t->second.waiting == 0) tenants_.erase(tenants_.find(t->first));
}

void EchoFilter::applied(std::string_view tenant) {
  if (tenants_.empty()) return;
  if (const auto it = tenants_.find(tenant); it != tenants_.end()) {
    ++it->second.applies;
  }
}

}  // namespace ic::replication
