#include "metrics/core_metrics.hh"

#include <algorithm>

namespace ic::metrics {

CoreMetrics::CoreMetrics(unsigned core) : core_(core) {
  sample_.cores.push_back(CoreFigures{.core = core});
}

template <typename V>
V& CoreMetrics::slot(LabelMap<V>& map, std::string_view label) {
  if (auto it = map.find(label); it != map.end()) return it->second;
  if (map.size() + 1 >= kMaxDynamicSeries) {
    // Keep one slot free for the overflow series itself.
    return map.try_emplace(std::string(kOverflowLabel)).first->second;
  }
  return map.try_emplace(std::string(label)).first->second;
}

void CoreMetrics::record_lookup(std::string_view model, Reason reason, bool hint_used,
                                std::int64_t latency_us) {
  // Most cores serve a handful of models in bursts: a byte compare with the
  // previous call's model skips hashing it (map nodes never move).
  if (last_series_ == nullptr || model != last_model_) {
    last_series_ = &slot(lookups_, model);
    last_model_.assign(model);
  }
  LookupSeries& series = *last_series_;
  ++series.calls[static_cast<std::size_t>(reason)][hint_used ? 1 : 0];
  const std::int64_t us = std::max<std::int64_t>(latency_us, 0);
  // First bound ≥ us; past the last bound only `count` (the +Inf bucket) sees it.
  const auto bound = std::lower_bound(kLatencyBucketsUs.begin(), kLatencyBucketsUs.end(), us);
  if (bound != kLatencyBucketsUs.end()) ++series.buckets[bound - kLatencyBucketsUs.begin()];
  ++series.count;
  series.sum_us += static_cast<std::uint64_t>(us);
  ++core_figures().lookups;
}

void CoreMetrics::add_tenant_evictions(std::string_view tenant_id, std::uint64_t keys) {
  slot(tenant_evictions_, tenant_id) += keys;
}

void CoreMetrics::set_tenant_evictions(std::string_view tenant_id, std::uint64_t total) {
  slot(tenant_evictions_, tenant_id) = total;
}

void CoreMetrics::set_index_entries(std::string_view model, std::int64_t keys) {
  slot(index_entries_, model) = keys;
}

Sample CoreMetrics::collect() {
  for (auto& [model, keys] : index_entries_) keys = 0;
  for (auto& family : families_) family->begin_collect();
  for (auto& collector : collectors_) collector(*this);
  Sample copy = sample_;
  copy.lookups.insert(lookups_.begin(), lookups_.end());
  copy.index_entries.insert(index_entries_.begin(), index_entries_.end());
  copy.tenant_evictions.insert(tenant_evictions_.begin(), tenant_evictions_.end());
  copy.rpc = rpc_.copy();
  copy.families.reserve(families_.size());
  for (const auto& family : families_) copy.families.emplace_back(family->copy());
  return copy;
}

}  // namespace ic::metrics
