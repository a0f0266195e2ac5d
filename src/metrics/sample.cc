#include "metrics/sample.hh"

namespace ic::metrics {

namespace {
template <typename A>
void add_arrays(A& into, const A& from) {
  for (std::size_t i = 0; i < into.size(); ++i) {
    if constexpr (requires { into[i].size(); }) {
      add_arrays(into[i], from[i]);
    } else {
      into[i] += from[i];
    }
  }
}

void add_value(LookupSeries& into, const LookupSeries& from) { into.merge(from); }
template <typename N>
void add_value(N& into, N from) {
  into += from;
}

template <typename M>
void add_maps(M& into, const M& from) {
  for (const auto& entry : from) {
    auto it = into.find(entry.first);
    if (it == into.end()) {
      into.emplace(entry.first, entry.second);
    } else {
      add_value(it->second, entry.second);
    }
  }
}
}  // namespace

void LookupSeries::merge(const LookupSeries& other) {
  add_arrays(calls, other.calls);
  add_arrays(buckets, other.buckets);
  count += other.count;
  sum_us += other.sum_us;
}

void Sample::merge(const Sample& other) {
  add_maps(lookups, other.lookups);
  add_maps(index_entries, other.index_entries);
  add_maps(tenant_evictions, other.tenant_evictions);
  add_arrays(index_evictions, other.index_evictions);
  index_stats_refused += other.index_stats_refused;
  add_arrays(auth, other.auth);
  ingest_messages += other.ingest_messages;
  ingest_entries += other.ingest_entries;
  add_arrays(events, other.events);
  add_arrays(open_connections, other.open_connections);
  add_arrays(accepted_connections, other.accepted_connections);
  open_streams += other.open_streams;
  http_requests += other.http_requests;
  add_arrays(policy_reloads, other.policy_reloads);
  add_arrays(prompt_text_failures, other.prompt_text_failures);
  cores.insert(cores.end(), other.cores.begin(), other.cores.end());
  rpc.merge(other.rpc);
  if (counters.size() < other.counters.size()) counters.resize(other.counters.size());
  for (std::size_t i = 0; i < other.counters.size(); ++i) counters[i] += other.counters[i];
  for (std::size_t i = 0; i < other.families.size(); ++i) {
    if (i >= families.size()) {
      families.push_back(other.families[i]);
    } else if (families[i].get() == nullptr) {
      families[i] = other.families[i];
    } else if (other.families[i].get() != nullptr) {
      families[i].get()->merge(*other.families[i].get());
    }
  }
}

}  // namespace ic::metrics
