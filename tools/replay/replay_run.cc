#include "replay/replay_run.hh"

#include <chrono>

#include "common/interrupt.hh"

namespace ic::tools::replay {

namespace v1 = inferencecache::v1alpha1;

namespace {

// Per-policy live state next to its result.
struct Lane {
  Lane(const ReplayOptions& options, Policy policy)
      : cluster(options.replicas, options.capacity_blocks, options.engine),
        router(policy, options.replicas, options.gateway) {}
  Cluster cluster;
  Router router;
  int consecutive_errors = 0;
};

std::size_t stream_key(std::size_t lane, std::size_t replica, std::size_t replicas) {
  return lane * replicas + replica;
}

v1::CacheStateUpdate base_update(const Scope& scope, std::size_t replica) {
  v1::CacheStateUpdate update;
  update.set_replica_id(replica_id(replica));
  update.set_tenant_id(scope.tenant_id);
  update.set_model_id(scope.model_id);
  update.set_hash_scheme(scope.hash_scheme);
  update.set_timestamp_us(0);  // "now": entries stay fresh however fast the replay runs
  return update;
}

// ReplicaStats for every replica of one lane: pressure from in-flight load at trace time.
bool report_stats(Lane& lane, std::size_t lane_index, const Scope& scope, std::int64_t now_ms,
                  const ReplayOptions& options, IndexClient& client, std::string* error) {
  for (std::size_t r = 0; r < options.replicas; ++r) {
    auto update = base_update(scope, r);
    auto* stats = update.mutable_stats();
    stats->set_replica_id(replica_id(r));
    stats->set_pressure(options.report_pressure ? lane.cluster.pressure(r, now_ms) : 0.0f);
    stats->set_hit_rate(lane.cluster.hit_rate(r));
    stats->set_cache_memory_bytes(static_cast<std::int64_t>(lane.cluster.cached_blocks(r)) *
                                  kMooncakeBlockTokens);
    stats->set_client_version("inferencecache-replay");
    if (!client.report(stream_key(lane_index, r, options.replicas), update, error)) return false;
  }
  return true;
}

// One request through one policy: ask, route, simulate, tell the index what changed.
bool step(const TraceRequest& request, Lane& lane, std::size_t lane_index, PolicyResult& result,
          const ReplayOptions& options, IndexClient& client, std::string* error) {
  if (result.policy == Policy::kCostRouter) {
    // Full knowledge of the simulated caches: no server involved.
    const Choice choice = lane.router.choose(lane.cluster, request, options.engine.slots, nullptr);
    const Served served = lane.cluster.serve(choice.replica, request);
    result.account.add(request.timestamp_ms, choice.replica, served.hit_tokens,
                       served.prompt_tokens);
    result.evictions += static_cast<std::int64_t>(served.evicted.size());
    return true;
  }
  v1::LookupRouteResponse response;
  const LookupCall call = client.lookup(make_lookup(request, result.scope), &response);
  result.lookup_us.push_back(call.latency_us);
  if (call.ok) {
    ++result.reasons[response.reason_code()];
    lane.consecutive_errors = 0;
  } else {
    ++result.errors[call.status];
    if (++lane.consecutive_errors >= options.max_consecutive_errors) {
      *error = std::to_string(lane.consecutive_errors) +
               " LookupRoute calls in a row failed (last: " + call.status + ")";
      return false;
    }
  }
  const Choice choice = lane.router.choose(lane.cluster, request, options.engine.slots,
                                           call.ok ? &response : nullptr);
  result.followed_hints += choice.followed_hint ? 1 : 0;
  result.saturated_overrides += choice.saturated_override ? 1 : 0;
  const Served served = lane.cluster.serve(choice.replica, request);
  result.account.add(request.timestamp_ms, choice.replica, served.hit_tokens, served.prompt_tokens);

  // The store first, then the evictions: a request longer than the cache evicts its own first
  // blocks, and the index must end up without them.
  auto update = base_update(result.scope, choice.replica);
  *update.add_prefixes() = make_chain_entry(request);
  if (!client.report(stream_key(lane_index, choice.replica, options.replicas), update, error)) {
    return false;
  }
  for (auto id : served.evicted) {
    v1::CacheEvent event;
    event.set_type(v1::CacheEvent::PREFIX_EVICTED);
    event.set_replica_id(replica_id(choice.replica));
    event.set_tenant_id(result.scope.tenant_id);
    event.set_model_id(result.scope.model_id);
    event.set_prefix_hash(block_hash_bytes(id));
    client.publish(event);
  }
  result.evictions += static_cast<std::int64_t>(served.evicted.size());
  return true;
}

void clear_replicas(const ReplayResult& result, const ReplayOptions& options, IndexClient& client) {
  for (const auto& policy : result.policies) {
    for (std::size_t r = 0; r < options.replicas; ++r) {
      v1::CacheEvent event;
      event.set_type(v1::CacheEvent::ALL_CLEARED);
      event.set_replica_id(replica_id(r));
      event.set_tenant_id(policy.scope.tenant_id);
      event.set_model_id(policy.scope.model_id);
      client.publish(event);
    }
  }
}

}  // namespace

ReplayResult run_replay(const std::vector<TraceRequest>& trace, const ReplayOptions& options,
                        IndexClient& client, ProgressBar& progress) {
  ReplayResult result(options.window_ms);
  std::vector<Lane> lanes;
  for (auto policy : options.policies) {
    Scope scope{options.tenant_prefix + "-" + std::string(policy_name(policy)), options.model_id,
                options.hash_scheme};
    result.policies.emplace_back(policy, std::move(scope), options);
    lanes.emplace_back(options, policy);
    result.policies.back().lookup_us.reserve(trace.size());
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const std::int64_t trace_start = trace.empty() ? 0 : trace.front().timestamp_ms;
  std::int64_t next_stats_ms = trace_start;
  std::string error;
  for (const auto& request : trace) {
    if (interrupted()) break;
    if (options.realtime) {
      const auto due =
          wall_start +
          std::chrono::microseconds(static_cast<std::int64_t>(
              static_cast<double>(request.timestamp_ms - trace_start) * 1000.0 / options.speed));
      const auto wait = std::chrono::duration_cast<std::chrono::microseconds>(
                            due - std::chrono::steady_clock::now())
                            .count();
      if (wait > 0 && !sleep_unless_interrupted(wait)) break;
    }
    const bool stats_due = request.timestamp_ms >= next_stats_ms;
    for (std::size_t i = 0; i < lanes.size() && error.empty(); ++i) {
      if (stats_due && result.policies[i].policy != Policy::kCostRouter &&
          !report_stats(lanes[i], i, result.policies[i].scope, request.timestamp_ms, options,
                        client, &error)) {
        break;
      }
      step(request, lanes[i], i, result.policies[i], options, client, &error);
    }
    if (stats_due) next_stats_ms = request.timestamp_ms + options.stats_interval_ms;
    if (!error.empty()) {
      result.fatal_error = error;
      break;
    }
    result.bound.add(request);
    ++result.requests_done;
    progress.update(result.requests_done);
  }
  progress.finish();
  result.interrupted = interrupted();
  if (result.fatal_error.empty()) {
    // After Ctrl-C too: an interrupted replay must not leave its entries in a shared server
    // (a second Ctrl-C during these few calls exits at once).
    if (options.clear_at_end) clear_replicas(result, options, client);
    if (!client.finish(&error)) result.fatal_error = error;
  }
  return result;
}

}  // namespace ic::tools::replay
