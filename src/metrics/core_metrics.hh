#pragma once
// The per-core metrics registry: one CoreMetrics per reactor core, written only
// by that core's thread with plain (non-atomic) counters, so recording a metric
// on the hot path costs an increment and, for model-labelled series, one hash
// probe on a heterogeneous map (no allocation once the series exists).
// A scrape runs collect() ON THE OWNING CORE (a Task posted by
// metrics::scrape) and sums the copies elsewhere (docs/admin.md "Metrics").
//
// Usage from any layer on a reactor thread:
//   ic::metrics::local().record_lookup(model, reason_code, hint_used, latency_us);

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/check.hh"
#include "metrics/group.hh"
#include "metrics/grpc_server_metrics.hh"
#include "metrics/labels.hh"
#include "metrics/sample.hh"

namespace ic::metrics {

// Distinct label values one core keeps per dynamic-label family (model,
// tenant_id). Further values fold into kOverflowLabel so a peer inventing
// model ids cannot grow memory without bound (docs/architecture.md, hostile peers).
inline constexpr std::size_t kMaxDynamicSeries = 1024;
inline constexpr std::string_view kOverflowLabel = "__overflow__";

class CoreMetrics {
 public:
  // Called on the owning core during a scrape before the copy; sets gauges
  // that are read from other structures (index shard sizes, mailbox depth).
  using Collector = std::function<void(CoreMetrics&)>;

  explicit CoreMetrics(unsigned core);
  CoreMetrics(const CoreMetrics&) = delete;
  CoreMetrics& operator=(const CoreMetrics&) = delete;

  unsigned core() const { return core_; }

  // --- hot path (owning core only) ---------------------------------------
  // One LookupRoute answered: inferencecache_lookup_route_calls_total
  // {model, reason_code, hint_used} += 1 and one latency observation (µs,
  // negative counts as 0) in inferencecache_lookup_route_latency_seconds
  // {model}; also the per-core lookup count. hint_used = the response carried
  // at least one replica score.
  void record_lookup(std::string_view model, Reason reason, bool hint_used,
                     std::int64_t latency_us);
  // Same, with the reason_code string as sent (unknown strings count as OTHER).
  void record_lookup(std::string_view model, std::string_view reason_code, bool hint_used,
                     std::int64_t latency_us) {
    record_lookup(model, reason_from_code(reason_code), hint_used, latency_us);
  }
  // One CacheStateUpdate ingested that made `entries` (key, replica) upserts.
  void add_ingest(std::uint64_t entries) {
    ++sample_.ingest_messages;
    sample_.ingest_entries += entries;
  }
  // One PublishEvent of CacheEvent.type `wire_type` received (applied or
  // ignored); a value outside the contract counts as "UNKNOWN".
  void add_event(int wire_type) { ++sample_.events[event_slot(wire_type)]; }
  // `keys` whole keys of `tenant_id` dropped by its quota
  // (inferencecache_tenant_evictions_total{tenant_id, reason="over_entries"}).
  void add_tenant_evictions(std::string_view tenant_id, std::uint64_t keys);
  // `entries` (key, replica) entries evicted
  // (inferencecache_index_evictions_total{algorithm, reason}).
  void add_index_evictions(EvictionAlgorithm algorithm, EvictionReason reason,
                           std::uint64_t entries) {
    sample_
        .index_evictions[static_cast<std::size_t>(algorithm)][static_cast<std::size_t>(reason)] +=
        entries;
  }
  // One control-listener auth decision (inferencecache_{snapshot,policy}_auth_total).
  void add_auth(AuthEndpoint endpoint, AuthResult result) {
    ++sample_.auth[static_cast<std::size_t>(endpoint)][static_cast<std::size_t>(result)];
  }
  // A connection of `listener` accepted / closed on this core.
  void connection_opened(Listener listener) {
    ++sample_.open_connections[static_cast<std::size_t>(listener)];
    ++sample_.accepted_connections[static_cast<std::size_t>(listener)];
  }
  void connection_closed(Listener listener) {
    --sample_.open_connections[static_cast<std::size_t>(listener)];
  }
  // An HTTP/2 stream opened / closed on a gRPC connection of this core.
  void stream_opened() { ++sample_.open_streams; }
  void stream_closed() { --sample_.open_streams; }
  // `n` more on the counter of label value `value` (an index into the
  // family's values) of a registered CounterFamily (metrics/group.hh); an
  // unregistered family counts nothing.
  void add(CounterFamilyId family, std::size_t value, std::uint64_t n = 1) {
    if (family.first == CounterFamilyId::kNone) return;
    IC_CHECK(value < family.size, "label value outside its CounterFamily");
    const std::size_t at = family.first + value;
    // A scratch registry (metrics::local() off a reactor) saw no registration.
    if (at >= sample_.counters.size()) sample_.counters.resize(at + 1);
    sample_.counters[at] += n;
  }
  // Makes room for `counters` registered counters (Registry::add_counter_family).
  void reserve_counters(std::size_t counters) {
    if (sample_.counters.size() < counters) sample_.counters.resize(counters);
  }
  // This core's value of a registered CoreFamily (metrics/group.hh), for its
  // owner to write on this core; nullptr for a family never registered with
  // this core's Registry (the owner then counts nothing).
  template <typename T>
  T* family(CoreFamilyId<T> id) {
    if (id.index >= families_.size()) return nullptr;
    CoreFamilyState& state = *families_[id.index];
    IC_CHECK(state.type() == &CoreFamilyOf<T>::kType, "CoreFamilyId of another Registry");
    return &static_cast<CoreFamilyOf<T>&>(state).value;
  }
  // Appends a registered CoreFamily's zeroed value (Registry::add_core_family).
  void add_family(std::unique_ptr<CoreFamilyState> state) { families_.push_back(std::move(state)); }
  // One admin HTTP request answered (any status).
  void add_http_request() { ++sample_.http_requests; }
  // One Runtime::post from this core to another; accepted=false when the
  // mailbox was full and the task was dropped (load shed).
  void add_cross_core_post(bool accepted) {
    ++(accepted ? core_figures().cross_core_posts : core_figures().cross_core_post_drops);
  }
  // One policy snapshot applied (ok) or rejected (bad body/file).
  void add_policy_reload(PolicySource source, bool ok) {
    ++sample_.policy_reloads[static_cast<std::size_t>(source)][ok ? 0 : 1];
  }

  // One prompt_text lookup failed open (inferencecache_prompt_text_failures_total{reason}).
  void add_prompt_text_failure(PromptTextFailure failure) {
    ++sample_.prompt_text_failures[static_cast<std::size_t>(failure)];
  }

  // --- gauges set by collectors at scrape time ---------------------------
  // Distinct prefix keys of `model` in this core's shard (reserved tenant
  // excluded). Every index_entries gauge is reset to 0 before collectors run,
  // so a model that drained shows 0 (docs/admin.md).
  void set_index_entries(std::string_view model, std::int64_t keys);
  // Cumulative evictions kept by the index shard itself (index::Shard::
  // eviction_counters / for_each_tenant_eviction): a collector copies the
  // totals instead of calling add_index_evictions / add_tenant_evictions.
  void set_index_evictions(EvictionAlgorithm algorithm, EvictionReason reason,
                           std::uint64_t total) {
    sample_.index_evictions[static_cast<std::size_t>(algorithm)][static_cast<std::size_t>(reason)] =
        total;
  }
  void set_tenant_evictions(std::string_view tenant_id, std::uint64_t total);
  // The shard's count of refused stats entries since start
  // (inferencecache_index_stats_refused_total).
  void set_index_stats_refused(std::uint64_t total) { sample_.index_stats_refused = total; }
  // (key, replica) entries in this core's shard.
  void set_core_index_entries(std::int64_t entries) { core_figures().index_entries = entries; }
  // Tasks queued in this core's inbound cross-core mailboxes.
  void set_mailbox_depth(std::int64_t tasks) { core_figures().mailbox_depth = tasks; }
  // The IORING_SETUP_* flags this core's ring was created with (a bitmask:
  // which of the reactor's setups the kernel accepted).
  void set_ring_setup_flags(std::int64_t flags) { core_figures().ring_setup_flags = flags; }

  // This core's go-grpc-prometheus series (grpc_server_*), one per method.
  RpcMetrics& rpc() { return rpc_; }

  // Registers a collector run by every collect() on this core, in order.
  void add_collector(Collector collector) { collectors_.push_back(std::move(collector)); }

  // --- scrape ------------------------------------------------------------
  // Runs the collectors and returns a copy (its `cores` holds this core's row
  // only). Owning core only.
  Sample collect();

 private:
  // Transparent hashing so lookups by string_view never build a std::string.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  template <typename V>
  using LabelMap = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  // Finds or (below kMaxDynamicSeries) creates the value for `label`; over
  // the limit returns the kOverflowLabel value.
  template <typename V>
  static V& slot(LabelMap<V>& map, std::string_view label);

  CoreFigures& core_figures() { return sample_.cores.front(); }

  unsigned core_;
  Sample sample_;  // fixed-label counters; dynamic maps below
  LabelMap<LookupSeries> lookups_;
  std::string last_model_;               // model of the previous record_lookup
  LookupSeries* last_series_ = nullptr;  // its series (node-stable map)
  LabelMap<std::int64_t> index_entries_;
  LabelMap<std::uint64_t> tenant_evictions_;
  std::vector<Collector> collectors_;
  std::vector<std::unique_ptr<CoreFamilyState>> families_;  // by CoreFamilyId::index
  RpcMetrics rpc_;
};

}  // namespace ic::metrics
