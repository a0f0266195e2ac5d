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

template <typename M>
void add_maps(M& into, const M& from) {
  for (const auto& [label, value] : from) {
    auto it = into.find(label);
    if (it == into.end()) {
      into.emplace(label, value);
    } else if constexpr (requires { it->second.merge(value); }) {
      it->second.merge(value);
    } else {
      it->second += value;
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
  add_arrays(auth, other.auth);
  ingest_messages += other.ingest_messages;
  ingest_entries += other.ingest_entries;
  add_arrays(events, other.events);
  add_arrays(open_connections, other.open_connections);
  add_arrays(accepted_connections, other.accepted_connections);
  open_streams += other.open_streams;
  http_requests += other.http_requests;
  add_arrays(policy_reloads, other.policy_reloads);
  cores.insert(cores.end(), other.cores.begin(), other.cores.end());
}

}  // namespace ic::metrics
