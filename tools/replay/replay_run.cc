#include "replay/replay_run.hh"

#include <chrono>
#include <limits>
#include <queue>

#include "common/interrupt.hh"

namespace ic::tools::replay {

namespace v1 = inferencecache::v1alpha1;

namespace {

using WallClock = std::chrono::steady_clock;

// Per-policy live state next to its result.
struct Lane {
  Lane(const ReplayOptions& options, Policy policy, std::vector<double> rates)
      : cluster(std::move(rates), options.capacity_blocks),
        router(policy, options.replicas, options.gateway, options.slots, options.follow_fraction) {}
  Cluster cluster;
  Router router;
  int consecutive_errors = 0;
};

// What happens next on the trace time line. At the same time a prefill end runs before a stats
// report and both before an arrival, so a replica freed at t serves a request arriving at t.
enum class EventKind { kPrefillEnd = 0, kStats = 1, kArrival = 2 };

struct Event {
  double at_ms = 0;
  EventKind kind = EventKind::kArrival;
  std::uint64_t seq = 0;  // insertion order: the last tie-break, so runs are deterministic
  std::size_t lane = 0;
  std::size_t replica = 0;
  bool operator>(const Event& o) const {
    if (at_ms != o.at_ms) return at_ms > o.at_ms;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

using EventQueue = std::priority_queue<Event, std::vector<Event>, std::greater<>>;

std::size_t stream_key(std::size_t lane, std::size_t replica, std::size_t replicas) {
  return lane * replicas + replica;
}

v1::CacheStateUpdate base_update(const Scope& scope, std::size_t replica) {
  v1::CacheStateUpdate update;
  update.set_replica_id(replica_id(replica));
  update.set_tenant_id(scope.tenant_id);
  update.set_model_id(scope.model_id);
  update.set_hash_scheme(scope.hash_scheme);
  update.set_timestamp_us(0);  // "now": the server stamps it on its own clock
  return update;
}

// ReplicaStats for every replica of one lane: pressure from the replica's queue now.
bool report_stats(const Lane& lane, std::size_t lane_index, const Scope& scope,
                  const ReplayOptions& options, IndexClient& client, std::string* error) {
  for (std::size_t r = 0; r < options.replicas; ++r) {
    auto update = base_update(scope, r);
    auto* stats = update.mutable_stats();
    stats->set_replica_id(replica_id(r));
    stats->set_pressure(options.report_pressure ? lane.cluster.pressure(r, options.slots) : 0.0f);
    stats->set_hit_rate(lane.cluster.hit_rate(r));
    stats->set_cache_memory_bytes(static_cast<std::int64_t>(lane.cluster.cached_blocks(r)) *
                                  kMooncakeBlockTokens);
    stats->set_client_version("inferencecache-replay");
    if (!client.report(stream_key(lane_index, r, options.replicas), update, error)) return false;
  }
  return true;
}

// The engine's KV events when a prefill ends: the stored chain, then the evictions (a request
// longer than the cache evicts its own first blocks, and the index must end up without them).
bool report_finished(const Finished& done, const TraceRequest& request, std::size_t lane_index,
                     PolicyResult& result, const ReplayOptions& options, IndexClient& client,
                     std::string* error) {
  auto update = base_update(result.scope, done.replica);
  *update.add_prefixes() = make_chain_entry(request);
  if (!client.report(stream_key(lane_index, done.replica, options.replicas), update, error)) {
    return false;
  }
  for (auto id : done.evicted) {
    v1::CacheEvent event;
    event.set_type(v1::CacheEvent::PREFIX_EVICTED);
    event.set_replica_id(replica_id(done.replica));
    event.set_tenant_id(result.scope.tenant_id);
    event.set_model_id(result.scope.model_id);
    event.set_prefix_hash(block_hash_bytes(id));
    client.publish(event);
  }
  return true;
}

// LookupRoute for the inferencecache lane; false (and *error) after too many failures in a row.
bool ask(const TraceRequest& request, Lane& lane, PolicyResult& result,
         const ReplayOptions& options, IndexClient& client, v1::LookupRouteResponse* response,
         bool* ok, std::string* error) {
  const LookupCall call = client.lookup(make_lookup(request, result.scope), response);
  result.lookup_us.push_back(call.latency_us);
  *ok = call.ok;
  if (call.ok) {
    ++result.reasons[response->reason_code()];
    lane.consecutive_errors = 0;
    return true;
  }
  ++result.errors[call.status];
  if (++lane.consecutive_errors < options.max_consecutive_errors) return true;
  *error = std::to_string(lane.consecutive_errors) +
           " LookupRoute calls in a row failed (last: " + call.status + ")";
  return false;
}

class Loop {
 public:
  Loop(const std::vector<TraceRequest>& trace, const ReplayOptions& options, IndexClient& client,
       ProgressBar& progress, ReplayResult& result)
      : trace_(trace), options_(options), client_(client), progress_(progress), result_(result) {}

  void run();

 private:
  bool any_server_lane() const;
  double next_stats_ms() const;
  void pace(double at_ms);
  void arrive(std::size_t index);
  void end_prefill(const Event& event);
  void stats();
  void push_end(std::size_t lane, std::size_t replica, double at_ms);

  const std::vector<TraceRequest>& trace_;
  const ReplayOptions& options_;
  IndexClient& client_;
  ProgressBar& progress_;
  ReplayResult& result_;
  std::vector<Lane> lanes_;
  EventQueue events_;
  std::uint64_t seq_ = 0;
  std::int64_t stats_ticks_ = 0;
  double trace_start_ms_ = 0;
  WallClock::time_point wall_start_;
  std::string error_;
};

bool Loop::any_server_lane() const {
  for (const auto& p : result_.policies) {
    if (talks_to_server(p.policy)) return true;
  }
  return false;
}

double Loop::next_stats_ms() const {
  if (options_.stats_interval_ms <= 0 || !any_server_lane()) {
    return std::numeric_limits<double>::infinity();
  }
  return trace_start_ms_ +
         static_cast<double>(stats_ticks_) * static_cast<double>(options_.stats_interval_ms);
}

// Tells the index the time line reached `at_ms` (IndexClient::at), then, when paced, waits for
// its wall time.
void Loop::pace(double at_ms) {
  client_.at(at_ms);
  if (!result_.paced) return;
  const auto due = wall_start_ + std::chrono::microseconds(static_cast<std::int64_t>(
                                     (at_ms - trace_start_ms_) * 1000.0 / options_.speed));
  const auto wait =
      std::chrono::duration_cast<std::chrono::microseconds>(due - WallClock::now()).count();
  if (wait > 0) {
    sleep_unless_interrupted(wait);
    result_.lag_us.push_back(0);
  } else {
    result_.lag_us.push_back(static_cast<std::uint64_t>(-wait));
  }
}

void Loop::push_end(std::size_t lane, std::size_t replica, double at_ms) {
  events_.push(Event{at_ms, EventKind::kPrefillEnd, seq_++, lane, replica});
}

void Loop::arrive(std::size_t index) {
  const TraceRequest& request = trace_[index];
  const auto now = static_cast<double>(request.timestamp_ms);
  for (std::size_t i = 0; i < lanes_.size() && error_.empty(); ++i) {
    auto& lane = lanes_[i];
    auto& result = result_.policies[i];
    v1::LookupRouteResponse response;
    bool ok = false;
    if (talks_to_server(result.policy) &&
        !ask(request, lane, result, options_, client_, &response, &ok, &error_)) {
      return;
    }
    const Choice choice =
        lane.router.choose(lane.cluster, index, request, now, ok ? &response : nullptr);
    result.followed_hints += choice.followed_hint ? 1 : 0;
    result.ignored_hints += choice.ignored_hint ? 1 : 0;
    result.saturated_overrides += choice.saturated_override ? 1 : 0;
    if (auto end = lane.cluster.enqueue(choice.replica, index, request, now)) {
      push_end(i, choice.replica, *end);
    }
  }
  result_.bound.add(request);
  ++result_.requests_done;
  progress_.update(result_.requests_done);
}

void Loop::end_prefill(const Event& event) {
  auto& lane = lanes_[event.lane];
  auto& result = result_.policies[event.lane];
  std::optional<double> next_end;
  const Finished done = lane.cluster.finish(event.replica, &next_end);
  if (next_end) push_end(event.lane, event.replica, *next_end);
  const TraceRequest& request = trace_[done.request];
  result.account.add(
      request.timestamp_ms, done.replica, done.hit_tokens, done.prompt_tokens, done.ttft_ms(),
      prefill_ms(done.prompt_tokens - done.hit_tokens, lane.cluster.rate(done.replica)));
  result.evictions += static_cast<std::int64_t>(done.evicted.size());
  if (talks_to_server(result.policy)) {
    report_finished(done, request, event.lane, result, options_, client_, &error_);
  }
}

void Loop::stats() {
  for (std::size_t i = 0; i < lanes_.size() && error_.empty(); ++i) {
    if (!talks_to_server(result_.policies[i].policy)) continue;
    report_stats(lanes_[i], i, result_.policies[i].scope, options_, client_, &error_);
  }
  ++stats_ticks_;
}

void Loop::run() {
  std::vector<double> rates;
  for (std::size_t r = 0; r < options_.replicas; ++r) rates.push_back(replica_rate(options_, r));
  for (auto policy : options_.policies) {
    Scope scope{options_.tenant_prefix + "-" + std::string(policy_name(policy)), options_.model_id,
                options_.hash_scheme};
    result_.policies.emplace_back(policy, std::move(scope), options_);
    lanes_.emplace_back(options_, policy, rates);
    if (talks_to_server(policy)) result_.policies.back().lookup_us.reserve(trace_.size());
  }
  result_.paced = paced(options_);
  trace_start_ms_ = trace_.empty() ? 0 : static_cast<double>(trace_.front().timestamp_ms);
  wall_start_ = WallClock::now();
  std::size_t next_arrival = 0;
  constexpr double kNever = std::numeric_limits<double>::infinity();
  while (!interrupted() && error_.empty()) {
    const double arrival_ms = next_arrival < trace_.size()
                                  ? static_cast<double>(trace_[next_arrival].timestamp_ms)
                                  : kNever;
    const double end_ms = events_.empty() ? kNever : events_.top().at_ms;
    if (arrival_ms == kNever && end_ms == kNever) break;  // every prefill done
    const double stats_ms = next_stats_ms();
    if (end_ms <= stats_ms && end_ms <= arrival_ms) {
      const Event event = events_.top();
      events_.pop();
      pace(event.at_ms);
      end_prefill(event);
    } else if (stats_ms <= arrival_ms) {
      pace(stats_ms);
      stats();
    } else {
      pace(arrival_ms);
      arrive(next_arrival++);
    }
  }
  result_.wall_s = std::chrono::duration<double>(WallClock::now() - wall_start_).count();
  result_.fatal_error = error_;
}

void clear_replicas(const ReplayResult& result, const ReplayOptions& options, IndexClient& client) {
  for (const auto& policy : result.policies) {
    if (!talks_to_server(policy.policy)) continue;
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

double replica_rate(const ReplayOptions& options, std::size_t replica) {
  if (options.prefill_rates.empty()) return 6000.0;
  return options.prefill_rates[replica % options.prefill_rates.size()];
}

bool paced(const ReplayOptions& options) {
  if (options.clock != Clock::kAuto) return options.clock == Clock::kWall;
  for (auto policy : options.policies) {
    if (talks_to_server(policy)) return true;
  }
  return false;
}

ReplayResult run_replay(const std::vector<TraceRequest>& trace, const ReplayOptions& options,
                        IndexClient& client, ProgressBar& progress) {
  ReplayResult result(options.window_ms);
  Loop(trace, options, client, progress, result).run();
  progress.finish();
  result.interrupted = interrupted();
  if (result.fatal_error.empty()) {
    std::string error;
    // After Ctrl-C too: an interrupted replay must not leave its entries in a shared server
    // (a second Ctrl-C during these few calls exits at once).
    if (options.clear_at_end) clear_replicas(result, options, client);
    if (!client.finish(&error)) result.fatal_error = error;
  }
  return result;
}

}  // namespace ic::tools::replay
