#include "replay/pd_run.hh"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <sstream>

#include "common/interrupt.hh"
#include "common/requests.hh"
#include "replay/cluster.hh"

namespace ic::tools::replay {

namespace v1 = inferencecache::v1alpha1;

namespace {

using WallClock = std::chrono::steady_clock;

// The nearest level two replicas on hosts `a` and `b` share: 0 host, 1 rack, 2 zone, 3 none.
int level(std::size_t a, std::size_t b) {
  if (a == b) return 0;
  if (a / 2 == b / 2) return 1;
  if (a / 4 == b / 4) return 2;
  return 3;
}

// llm-d's topology affinity by level.
double affinity(int lvl) {
  static constexpr double kAffinity[4] = {1.0, 0.2, 0.05, 0.0};
  return kAffinity[lvl];
}

// A decode running on a decode replica: its first token is out when the replica's progress
// reaches `first_at`, its last at `done_at`.
struct Running {
  std::size_t request = 0;
  double first_at = 0;  // progress (tokens) at which its first token is out
  double done_at = 0;   // progress at which its last token is out
  double start_ms = 0;  // when it took its slot
  bool first_out = false;
};

// A decode replica's decodes. Every running decode gets one token per step and a step takes
// step_ms + step_per_seq_ms × the decodes running during it, so all of them advance together:
// `progress` counts the tokens each running decode got since the replay began, at the rate of
// the current step. While the replica's engine prefills a decode-only request (until
// `paused_until`) its decodes make no progress.
struct DecodeReplica {
  int active = 0;
  std::vector<Running> running;     // `active` of them
  std::deque<std::size_t> waiting;  // requests whose KV is there, waiting for a slot
  double progress = 0;              // tokens per running decode so far
  double at_ms = 0;                 // when `progress` was last advanced
  double paused_until = 0;          // end of the local prefill running there, ms
  double next_at = 0;               // the progress the pending kDecodeEnd event is for
  std::uint64_t generation = 0;     // of the pending kDecodeEnd event; older ones are stale
};

// Per-request state of one lane.
struct Flight {
  std::size_t decode = 0;
  bool pair = false;
};

struct Lane {
  Lane(const PdOptions& o, PdPolicy p)
      : prefill(std::vector<double>(o.prefill_replicas, o.prefill_rate), o.capacity_blocks),
        local(std::vector<double>(o.decode_replicas, o.prefill_rate), o.capacity_blocks),
        decodes(o.decode_replicas),
        policy(p) {}
  Cluster prefill;  // the prefill pool
  Cluster local;    // the decode pool: its caches and its own prefill engines
  std::vector<DecodeReplica> decodes;
  std::vector<Flight> flights;
  PdPolicy policy;
  int consecutive_errors = 0;
  double decode_ms_sum = 0;  // Σ finished decode durations (for the full-knowledge slot wait)
  std::int64_t decodes_done = 0;
};

enum class Kind { kPrefillEnd = 0, kLocalEnd, kTransferEnd, kDecodeEnd, kStats, kArrival };

struct Event {
  double at_ms = 0;
  Kind kind = Kind::kArrival;
  std::uint64_t seq = 0;
  std::size_t lane = 0;
  std::size_t replica = 0;
  std::size_t request = 0;
  std::uint64_t generation = 0;  // kDecodeEnd: the replica's generation when it was scheduled
  bool operator>(const Event& o) const {
    if (at_ms != o.at_ms) return at_ms > o.at_ms;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

// The decision for one request: prefill replica (none: decode-only) and decode replica.
struct PdChoice {
  std::optional<std::size_t> prefill;
  std::size_t decode = 0;
};

std::optional<std::size_t> index_of(const std::string& id, const std::string& prefix,
                                    std::size_t n) {
  if (id.rfind(prefix, 0) != 0) return std::nullopt;
  try {
    const std::size_t k = std::stoul(id.substr(prefix.size()));
    if (k < n) return k;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

class PdLoop {
 public:
  PdLoop(const std::vector<TraceRequest>& trace, const PdOptions& options, IndexClient& client,
         ProgressBar& progress, PdResult& result)
      : trace_(trace), o_(options), client_(client), progress_(progress), result_(result) {}
  void run();

 private:
  double slot_wait_ms(const Lane& lane, std::size_t d) const;
  double transfer_ms(std::size_t p, std::size_t d, std::int64_t tokens) const {
    return static_cast<double>(tokens) / 1000.0 * o_.transfer_ms_per_1k[level(p, d)];
  }
  PdChoice full_knowledge(const Lane& lane, const TraceRequest& r, double now) const;
  PdChoice decode_first(const Lane& lane, const TraceRequest& r) const;
  PdChoice ask_server(Lane& lane, PdPolicyResult& res, const TraceRequest& r);
  void arrive(std::size_t index);
  void start(std::size_t lane, const PdChoice& c, std::size_t index, double now);
  void on_prefill_end(const Event& e);
  void on_local_end(const Event& e);
  void on_transfer_end(const Event& e);
  void on_decode_end(const Event& e);
  void decode_ready(std::size_t lane, std::size_t d, std::size_t index, double at);
  void start_decode(std::size_t lane, std::size_t d, std::size_t index, double at);
  void start_waiting(std::size_t lane, std::size_t d, double at);
  void report(std::size_t lane, const std::string& replica, std::size_t stream,
              const TraceRequest& r, const std::vector<std::uint64_t>& evicted);
  void stats();
  void pace(double at_ms);
  void push(double at, Kind kind, std::size_t lane, std::size_t replica, std::size_t request,
            std::uint64_t generation = 0) {
    events_.push(Event{at, kind, seq_++, lane, replica, request, generation});
  }
  double step_ms(int running) const { return o_.step_ms + o_.step_per_seq_ms * running; }
  void advance(DecodeReplica& dr, double now) const;
  void schedule_decode_end(std::size_t lane, std::size_t d);
  void pause(std::size_t lane, std::size_t d, double now, double until);
  v1::CacheStateUpdate base_update(std::size_t lane, const std::string& replica) const;

  const std::vector<TraceRequest>& trace_;
  const PdOptions& o_;
  IndexClient& client_;
  ProgressBar& progress_;
  PdResult& result_;
  std::vector<Lane> lanes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  double trace_start_ms_ = 0;
  WallClock::time_point wall_start_;
  std::string error_;
};

double PdLoop::slot_wait_ms(const Lane& lane, std::size_t d) const {
  const DecodeReplica& dr = lane.decodes[d];
  const int over = dr.active + static_cast<int>(dr.waiting.size()) + 1 - o_.decode_slots;
  if (over <= 0) return 0;
  const double mean = lane.decodes_done > 0
                          ? lane.decode_ms_sum / static_cast<double>(lane.decodes_done)
                          : 350 * (o_.step_ms + o_.step_per_seq_ms * o_.decode_slots);
  return static_cast<double>(over) * mean / static_cast<double>(o_.decode_slots);
}

// The option of least expected TTFT from the true state (queues, caches with what is on its way,
// slots), decode-only only below the threshold as for every policy; equal: the decode replica
// with fewer running decodes.
PdChoice PdLoop::full_knowledge(const Lane& lane, const TraceRequest& r, double now) const {
  PdChoice best;
  double best_ttft = std::numeric_limits<double>::infinity();
  int best_active = 0;
  const auto consider = [&](std::optional<std::size_t> p, std::size_t d, double ttft) {
    const int active = lane.decodes[d].active;
    if (ttft < best_ttft - 1e-9 || (ttft <= best_ttft + 1e-9 && active < best_active)) {
      best = PdChoice{p, d};
      best_ttft = ttft;
      best_active = active;
    }
  };
  for (std::size_t d = 0; d < o_.decode_replicas; ++d) {
    const std::int64_t held_d = lane.local.expected_hit_tokens(d, r);
    const double slot = slot_wait_ms(lane, d);
    const double step = o_.step_ms + o_.step_per_seq_ms * (lane.decodes[d].active + 1);
    const double local =
        lane.local.expected_wait_ms(d, now) + prefill_ms(r.input_length - held_d, o_.prefill_rate);
    // Decode-only under the same rule as the others: below the threshold only.
    if (r.input_length - held_d < o_.min_uncached_tokens)
      consider(std::nullopt, d, std::max(local, slot) + step);
    for (std::size_t p = 0; p < o_.prefill_replicas; ++p) {
      const double ready =
          lane.prefill.expected_wait_ms(p, now) +
          prefill_ms(r.input_length - lane.prefill.expected_hit_tokens(p, r), o_.prefill_rate) +
          transfer_ms(p, d, r.input_length - held_d);
      consider(p, d, std::max(ready, slot) + step);
    }
  }
  return best;
}

// llm-d's decode-first rule: the decode pod by prefix (weight 2) and load (1); disaggregate when
// the uncached tokens there reach the threshold, the prefill pod by prefix (2), queue (1) and
// topology affinity to the decode pod.
PdChoice PdLoop::decode_first(const Lane& lane, const TraceRequest& r) const {
  const auto prompt = static_cast<double>(r.input_length);
  PdChoice c;
  double best = -std::numeric_limits<double>::infinity();
  for (std::size_t d = 0; d < o_.decode_replicas; ++d) {
    const DecodeReplica& dr = lane.decodes[d];
    const double load =
        std::min(1.0, static_cast<double>(dr.active + static_cast<int>(dr.waiting.size()) +
                                          static_cast<int>(lane.local.outstanding(d))) /
                          o_.decode_slots);
    const double score =
        2 * static_cast<double>(lane.local.expected_hit_tokens(d, r)) / prompt + (1 - load);
    if (score > best) {
      best = score;
      c.decode = d;
    }
  }
  if (r.input_length - lane.local.expected_hit_tokens(c.decode, r) < o_.min_uncached_tokens)
    return c;
  std::size_t most = 1;
  for (std::size_t p = 0; p < o_.prefill_replicas; ++p)
    most = std::max(most, lane.prefill.outstanding(p));
  best = -std::numeric_limits<double>::infinity();
  for (std::size_t p = 0; p < o_.prefill_replicas; ++p) {
    const double score =
        2 * static_cast<double>(lane.prefill.expected_hit_tokens(p, r)) / prompt +
        (1 - static_cast<double>(lane.prefill.outstanding(p)) / static_cast<double>(most)) +
        affinity(level(p, c.decode));
    if (score > best) {
      best = score;
      c.prefill = p;
    }
  }
  return c;
}

PdChoice PdLoop::ask_server(Lane& lane, PdPolicyResult& res, const TraceRequest& r) {
  v1::LookupPDRouteRequest req;
  const v1::LookupRouteRequest route =
      make_lookup(r, Scope{res.tenant, o_.model_id, o_.hash_scheme});
  req.set_tenant_id(route.tenant_id());
  req.set_model_id(route.model_id());
  req.set_hash_scheme(route.hash_scheme());
  req.set_pd_topology_ref(o_.topology);
  *req.mutable_block_hashes() = route.block_hashes();
  *req.mutable_block_token_counts() = route.block_token_counts();
  v1::LookupPDRouteResponse response;
  const LookupCall call = client_.lookup_pd(req, &response);
  res.lookup_us.push_back(call.latency_us);
  if (!call.ok) {
    ++res.errors[call.status];
    if (++lane.consecutive_errors >= o_.max_consecutive_errors) {
      error_ = std::to_string(lane.consecutive_errors) +
               " LookupPDRoute calls in a row failed (last: " + call.status + ")";
    }
    ++res.fallbacks;
    return decode_first(lane, r);
  }
  lane.consecutive_errors = 0;
  ++res.reasons[response.reason_code()];
  const auto d = index_of(response.decode_replica_id(), "decode-", o_.decode_replicas);
  if (!d) {
    ++res.fallbacks;
    return decode_first(lane, r);
  }
  PdChoice c;
  c.decode = *d;
  c.prefill = index_of(response.prefill_replica_id(), "prefill-", o_.prefill_replicas);
  return c;
}

v1::CacheStateUpdate PdLoop::base_update(std::size_t lane, const std::string& replica) const {
  v1::CacheStateUpdate u;
  u.set_replica_id(replica);
  u.set_tenant_id(result_.policies[lane].tenant);
  u.set_model_id(o_.model_id);
  u.set_hash_scheme(o_.hash_scheme);
  return u;
}

void PdLoop::report(std::size_t lane, const std::string& replica, std::size_t stream,
                    const TraceRequest& r, const std::vector<std::uint64_t>& evicted) {
  if (lanes_[lane].policy != PdPolicy::kInferenceCache || !error_.empty()) return;
  auto update = base_update(lane, replica);
  *update.add_prefixes() = make_chain_entry(r);
  if (!client_.report(stream, update, &error_)) return;
  for (auto id : evicted) {
    v1::CacheEvent event;
    event.set_type(v1::CacheEvent::PREFIX_EVICTED);
    event.set_replica_id(replica);
    event.set_tenant_id(result_.policies[lane].tenant);
    event.set_model_id(o_.model_id);
    event.set_prefix_hash(block_hash_bytes(id));
    client_.publish(event);
  }
}

void PdLoop::stats() {
  for (std::size_t i = 0; i < lanes_.size() && error_.empty(); ++i) {
    const Lane& lane = lanes_[i];
    if (lane.policy != PdPolicy::kInferenceCache) continue;
    const auto send = [&](const std::string& id, std::size_t stream, float pressure) {
      auto update = base_update(i, id);
      update.mutable_stats()->set_replica_id(id);
      update.mutable_stats()->set_pressure(std::min(1.0f, pressure));
      update.mutable_stats()->set_client_version("inferencecache-replay");
      client_.report(stream, update, &error_);
    };
    for (std::size_t p = 0; p < o_.prefill_replicas; ++p)
      send(prefill_id(p), p, lane.prefill.pressure(p, o_.decode_slots));
    for (std::size_t d = 0; d < o_.decode_replicas; ++d) {
      const DecodeReplica& dr = lane.decodes[d];
      send(decode_id(d), o_.prefill_replicas + d,
           static_cast<float>(dr.active + static_cast<int>(dr.waiting.size())) /
               static_cast<float>(o_.decode_slots));
    }
  }
}

// Tells the index the time line reached `at_ms` (IndexClient::at), then, when paced, waits for
// its wall time.
void PdLoop::pace(double at_ms) {
  client_.at(at_ms);
  if (!result_.paced) return;
  const auto due = wall_start_ + std::chrono::microseconds(static_cast<std::int64_t>(
                                     (at_ms - trace_start_ms_) * 1000.0 / o_.speed));
  const auto wait =
      std::chrono::duration_cast<std::chrono::microseconds>(due - WallClock::now()).count();
  if (wait > 0) {
    sleep_unless_interrupted(wait);
    result_.lag_us.push_back(0);
  } else {
    result_.lag_us.push_back(static_cast<std::uint64_t>(-wait));
  }
}

void PdLoop::arrive(std::size_t index) {
  const TraceRequest& r = trace_[index];
  const auto now = static_cast<double>(r.timestamp_ms);
  for (std::size_t i = 0; i < lanes_.size() && error_.empty(); ++i) {
    Lane& lane = lanes_[i];
    PdChoice c;
    switch (lane.policy) {
      case PdPolicy::kFullKnowledge:
        c = full_knowledge(lane, r, now);
        break;
      case PdPolicy::kDecodeFirst:
        c = decode_first(lane, r);
        break;
      case PdPolicy::kInferenceCache:
        c = ask_server(lane, result_.policies[i], r);
        break;
    }
    start(i, c, index, now);
  }
  ++result_.requests_done;
  progress_.update(result_.requests_done);
}

void PdLoop::start(std::size_t lane_index, const PdChoice& c, std::size_t index, double now) {
  Lane& lane = lanes_[lane_index];
  Flight& f = lane.flights[index];
  f.decode = c.decode;
  f.pair = c.prefill.has_value();
  PdPolicyResult& res = result_.policies[lane_index];
  if (f.pair) {
    ++res.pairs;
    if (auto end = lane.prefill.enqueue(*c.prefill, index, trace_[index], now))
      push(*end, Kind::kPrefillEnd, lane_index, *c.prefill, index);
  } else {
    ++res.decode_only;
    if (auto end = lane.local.enqueue(c.decode, index, trace_[index], now)) {
      push(*end, Kind::kLocalEnd, lane_index, c.decode, index);
      pause(lane_index, c.decode, now, *end);
    }
  }
}

void PdLoop::on_prefill_end(const Event& e) {
  Lane& lane = lanes_[e.lane];
  std::optional<double> next;
  const Finished done = lane.prefill.finish(e.replica, &next);
  if (next) push(*next, Kind::kPrefillEnd, e.lane, e.replica, 0);
  const TraceRequest& r = trace_[done.request];
  report(e.lane, prefill_id(e.replica), e.replica, r, done.evicted);
  const std::size_t d = lane.flights[done.request].decode;
  const std::int64_t moved = r.input_length - lane.local.expected_hit_tokens(d, r);
  push(done.end_ms + transfer_ms(e.replica, d, moved), Kind::kTransferEnd, e.lane, d, done.request);
}

void PdLoop::on_local_end(const Event& e) {
  Lane& lane = lanes_[e.lane];
  std::optional<double> next;
  const Finished done = lane.local.finish(e.replica, &next);
  if (next) {
    push(*next, Kind::kLocalEnd, e.lane, e.replica, 0);
    pause(e.lane, e.replica, done.end_ms, *next);
  }
  const TraceRequest& r = trace_[done.request];
  report(e.lane, decode_id(e.replica), o_.prefill_replicas + e.replica, r, done.evicted);
  decode_ready(e.lane, e.replica, done.request, done.end_ms);
}

void PdLoop::on_transfer_end(const Event& e) {
  Lane& lane = lanes_[e.lane];
  const TraceRequest& r = trace_[e.request];
  const std::vector<std::uint64_t> evicted = lane.local.store(e.replica, r);
  report(e.lane, decode_id(e.replica), o_.prefill_replicas + e.replica, r, evicted);
  decode_ready(e.lane, e.replica, e.request, e.at_ms);
}

void PdLoop::decode_ready(std::size_t lane, std::size_t d, std::size_t index, double at) {
  DecodeReplica& dr = lanes_[lane].decodes[d];
  if (dr.active < o_.decode_slots) {
    start_decode(lane, d, index, at);
  } else {
    dr.waiting.push_back(index);
  }
}

// Brings the replica's progress to `now` at the step time of its running decodes (none while
// a local prefill holds the engine).
void PdLoop::advance(DecodeReplica& dr, double now) const {
  const double from = std::max(dr.at_ms, dr.paused_until);
  if (dr.active > 0 && now > from) dr.progress += (now - from) / step_ms(dr.active);
  dr.at_ms = std::max(dr.at_ms, now);
}

// A local prefill holds the replica's engine from `now` until `until`: its decodes stop.
void PdLoop::pause(std::size_t lane, std::size_t d, double now, double until) {
  DecodeReplica& dr = lanes_[lane].decodes[d];
  advance(dr, now);
  dr.paused_until = std::max(dr.paused_until, until);
  schedule_decode_end(lane, d);
}

// (Re)schedules the replica's next first or last token; the event scheduled before is stale.
void PdLoop::schedule_decode_end(std::size_t lane, std::size_t d) {
  DecodeReplica& dr = lanes_[lane].decodes[d];
  ++dr.generation;
  if (dr.running.empty()) return;
  double next = std::numeric_limits<double>::infinity();
  for (const Running& r : dr.running) next = std::min(next, r.first_out ? r.done_at : r.first_at);
  dr.next_at = next;
  const double from = std::max(dr.at_ms, dr.paused_until);
  push(from + std::max(0.0, next - dr.progress) * step_ms(dr.active), Kind::kDecodeEnd, lane, d, 0,
       dr.generation);
}

void PdLoop::start_decode(std::size_t lane_index, std::size_t d, std::size_t index, double at) {
  Lane& lane = lanes_[lane_index];
  DecodeReplica& dr = lane.decodes[d];
  advance(dr, at);
  ++dr.active;
  const int tokens = std::max(1, trace_[index].output_length);
  dr.running.push_back(Running{index, dr.progress + 1, dr.progress + tokens, at, false});
  schedule_decode_end(lane_index, d);
}

void PdLoop::start_waiting(std::size_t lane, std::size_t d, double at) {
  DecodeReplica& dr = lanes_[lane].decodes[d];
  while (!dr.waiting.empty() && dr.active < o_.decode_slots) {
    const std::size_t next = dr.waiting.front();
    dr.waiting.pop_front();
    start_decode(lane, d, next, at);
  }
}

// The replica's progress reached `next_at`: first tokens out (TTFT) and decodes done (TBT).
void PdLoop::on_decode_end(const Event& e) {
  Lane& lane = lanes_[e.lane];
  DecodeReplica& dr = lane.decodes[e.replica];
  if (e.generation != dr.generation) return;  // rescheduled since
  advance(dr, e.at_ms);
  // The event is for `next_at`: rounding of a large time must not leave it a hair short (it
  // would be scheduled again at the same instant, forever).
  dr.progress = std::max(dr.progress, dr.next_at);
  constexpr double kTokenEpsilon = 1e-9;
  PdPolicyResult& res = result_.policies[e.lane];
  for (Running& run : dr.running) {
    if (run.first_out || run.first_at > dr.progress + kTokenEpsilon) continue;
    run.first_out = true;
    res.ttft_ms.push_back(e.at_ms - static_cast<double>(trace_[run.request].timestamp_ms));
  }
  std::erase_if(dr.running, [&](const Running& run) {
    if (!run.first_out || run.done_at > dr.progress + kTokenEpsilon) return false;
    const TraceRequest& r = trace_[run.request];
    const double duration = e.at_ms - run.start_ms;
    if (r.output_length > 0) res.tbt_ms.push_back(duration / r.output_length);
    lane.decode_ms_sum += duration;
    ++lane.decodes_done;
    return true;
  });
  dr.active = static_cast<int>(dr.running.size());
  start_waiting(e.lane, e.replica, e.at_ms);
  schedule_decode_end(e.lane, e.replica);
}

void PdLoop::run() {
  bool server = false;
  for (PdPolicy p : o_.policies) {
    PdPolicyResult res;
    res.policy = p;
    res.tenant = o_.tenant_prefix + "-pd-" + std::string(pd_policy_name(p));
    res.ttft_ms.reserve(trace_.size());
    result_.policies.push_back(std::move(res));
    lanes_.emplace_back(o_, p);
    lanes_.back().flights.resize(trace_.size());
    server = server || p == PdPolicy::kInferenceCache;
  }
  result_.paced = o_.clock == Clock::kWall || (o_.clock == Clock::kAuto && server);
  trace_start_ms_ = trace_.empty() ? 0 : static_cast<double>(trace_.front().timestamp_ms);
  wall_start_ = WallClock::now();
  std::size_t next_arrival = 0;
  double next_stats = server && o_.stats_interval_ms > 0 ? trace_start_ms_
                                                         : std::numeric_limits<double>::infinity();
  constexpr double kNever = std::numeric_limits<double>::infinity();
  while (!interrupted() && error_.empty()) {
    const double arrival = next_arrival < trace_.size()
                               ? static_cast<double>(trace_[next_arrival].timestamp_ms)
                               : kNever;
    const double event = events_.empty() ? kNever : events_.top().at_ms;
    if (arrival == kNever && event == kNever) break;
    if (event <= next_stats && event <= arrival) {
      const Event e = events_.top();
      events_.pop();
      pace(e.at_ms);
      switch (e.kind) {
        case Kind::kPrefillEnd:
          on_prefill_end(e);
          break;
        case Kind::kLocalEnd:
          on_local_end(e);
          break;
        case Kind::kTransferEnd:
          on_transfer_end(e);
          break;
        case Kind::kDecodeEnd:
          on_decode_end(e);
          break;
        default:
          break;
      }
    } else if (next_stats <= arrival) {
      pace(next_stats);
      stats();
      next_stats += static_cast<double>(o_.stats_interval_ms);
      if (arrival == kNever) next_stats = kNever;  // no stats while only draining
    } else {
      pace(arrival);
      arrive(next_arrival++);
    }
  }
  result_.wall_s = std::chrono::duration<double>(WallClock::now() - wall_start_).count();
  result_.fatal_error = error_;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Nearest-rank percentile.
double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

const PdPolicyResult* find(const PdResult& r, PdPolicy p) {
  for (const auto& x : r.policies) {
    if (x.policy == p) return &x;
  }
  return nullptr;
}

}  // namespace

std::string_view pd_policy_name(PdPolicy policy) {
  switch (policy) {
    case PdPolicy::kFullKnowledge:
      return "full-knowledge";
    case PdPolicy::kDecodeFirst:
      return "decode-first";
    default:
      return "inferencecache";
  }
}

std::string prefill_id(std::size_t k) { return "prefill-" + std::to_string(k); }
std::string decode_id(std::size_t k) { return "decode-" + std::to_string(k); }

std::string pd_topology_json(const PdOptions& o, const std::vector<TraceRequest>& trace) {
  double out = 0;
  for (const auto& r : trace) out += r.output_length;
  const double mean_out = trace.empty() ? 300 : out / static_cast<double>(trace.size());
  const double decode_ms = mean_out * (o.step_ms + o.step_per_seq_ms * o.decode_slots / 2.0);
  const auto hold_ms = std::max<std::int64_t>(1, std::llround(decode_ms / o.speed));
  nlohmann::json doc{{"version", 7}};
  nlohmann::json topo{{"name", o.topology},
                      {"transport", "NIXL"},
                      {"disaggregation", {{"minUncachedTokens", o.min_uncached_tokens}}},
                      {"decodeHoldMs", hold_ms},
                      {"affinityWeight", o.affinity_weight}};
  const auto place = [](std::size_t k) {
    return nlohmann::json{{"host", "host-" + std::to_string(k)},
                          {"rack", "rack-" + std::to_string(k / 2)},
                          {"zone", "zone-" + std::to_string(k / 4)}};
  };
  topo["prefill"] = nlohmann::json::array();
  for (std::size_t k = 0; k < o.prefill_replicas; ++k) {
    nlohmann::json r = place(k);
    r["replica"] = prefill_id(k);
    topo["prefill"].push_back(r);
  }
  topo["decode"] = nlohmann::json::array();
  for (std::size_t k = 0; k < o.decode_replicas; ++k) {
    nlohmann::json r = place(k);
    r["replica"] = decode_id(k);
    r["slots"] = o.decode_slots;
    topo["decode"].push_back(r);
  }
  doc["pdTopologies"] = nlohmann::json::array({topo});
  return doc.dump();
}

PdResult run_pd_replay(const std::vector<TraceRequest>& trace, const PdOptions& options,
                       IndexClient& client, ProgressBar& progress) {
  PdResult result;
  PdLoop(trace, options, client, progress, result).run();
  progress.finish();
  result.interrupted = interrupted();
  if (result.fatal_error.empty()) {
    if (options.clear_at_end) {
      for (const auto& p : result.policies) {
        if (p.policy != PdPolicy::kInferenceCache) continue;
        for (std::size_t k = 0; k < options.prefill_replicas + options.decode_replicas; ++k) {
          v1::CacheEvent event;
          event.set_type(v1::CacheEvent::ALL_CLEARED);
          event.set_replica_id(k < options.prefill_replicas
                                   ? prefill_id(k)
                                   : decode_id(k - options.prefill_replicas));
          event.set_tenant_id(p.tenant);
          event.set_model_id(options.model_id);
          client.publish(event);
        }
      }
    }
    std::string error;
    if (!client.finish(&error)) result.fatal_error = error;
  }
  return result;
}

nlohmann::json render_pd_json(const PdResult& result, const PdOptions& o,
                              const std::string& trace_path) {
  nlohmann::json j{{"schema", "inferencecache-replay-pd/v1"},
                   {"trace", trace_path},
                   {"requests", result.requests_done},
                   {"prefill_replicas", o.prefill_replicas},
                   {"decode_replicas", o.decode_replicas},
                   {"capacity_blocks", o.capacity_blocks},
                   {"prefill_rate", o.prefill_rate},
                   {"decode_slots", o.decode_slots},
                   {"step_ms", o.step_ms},
                   {"step_per_seq_ms", o.step_per_seq_ms},
                   {"min_uncached_tokens", o.min_uncached_tokens},
                   {"speed", o.speed},
                   {"paced", result.paced},
                   {"wall_s", result.wall_s}};
  std::vector<std::uint64_t> lag = result.lag_us;
  std::sort(lag.begin(), lag.end());
  j["events_late_p99_ms"] =
      lag.empty() ? 0.0 : static_cast<double>(lag[(lag.size() * 99) / 100]) / 1000.0;
  j["policies"] = nlohmann::json::array();
  for (const auto& p : result.policies) {
    j["policies"].push_back({{"policy", pd_policy_name(p.policy)},
                             {"tenant", p.tenant},
                             {"ttft_mean_s", mean(p.ttft_ms) / 1000},
                             {"ttft_p50_s", pct(p.ttft_ms, 0.5) / 1000},
                             {"ttft_p90_s", pct(p.ttft_ms, 0.9) / 1000},
                             {"tbt_mean_ms", mean(p.tbt_ms)},
                             {"tbt_p50_ms", pct(p.tbt_ms, 0.5)},
                             {"tbt_p90_ms", pct(p.tbt_ms, 0.9)},
                             {"pairs", p.pairs},
                             {"decode_only", p.decode_only},
                             {"fallbacks", p.fallbacks},
                             {"reasons", p.reasons},
                             {"errors", p.errors}});
  }
  const auto* ic = find(result, PdPolicy::kInferenceCache);
  const auto* fk = find(result, PdPolicy::kFullKnowledge);
  const auto* df = find(result, PdPolicy::kDecodeFirst);
  if (ic && fk && mean(fk->ttft_ms) > 0)
    j["ic_over_fk_ttft_mean"] = mean(ic->ttft_ms) / mean(fk->ttft_ms);
  if (ic && df && mean(df->ttft_ms) > 0)
    j["ic_over_df_ttft_mean"] = mean(ic->ttft_ms) / mean(df->ttft_ms);
  if (ic && df && pct(df->tbt_ms, 0.9) > 0)
    j["ic_over_df_tbt_p90"] = pct(ic->tbt_ms, 0.9) / pct(df->tbt_ms, 0.9);
  return j;
}

std::string render_pd_text(const PdResult& result, const PdOptions& o,
                           const std::string& trace_path) {
  const nlohmann::json j = render_pd_json(result, o, trace_path);
  std::ostringstream out;
  char line[256];
  out << "inferencecache-replay --pd: " << trace_path << ", " << result.requests_done
      << " requests\n";
  std::snprintf(line, sizeof line,
                "%zu prefill + %zu decode replicas, %zu blocks each, %.0f tokens/s, %d decode "
                "slots, step %.1f + %.1f ms/seq, disaggregate at >= %lld uncached tokens\n",
                o.prefill_replicas, o.decode_replicas, o.capacity_blocks, o.prefill_rate,
                o.decode_slots, o.step_ms, o.step_per_seq_ms,
                static_cast<long long>(o.min_uncached_tokens));
  out << line;
  if (result.paced) {
    std::snprintf(line, sizeof line, "paced at trace time / %.1f; events late p99 %.1f ms\n",
                  o.speed, j["events_late_p99_ms"].get<double>());
    out << line;
  }
  out << "\npolicy           TTFT mean   p50     p90   (s)   TBT mean   p50    p90 (ms)   "
         "pairs  decode-only\n";
  for (const auto& p : j["policies"]) {
    std::snprintf(
        line, sizeof line, "%-16s %8.2f %7.2f %7.2f       %8.2f %6.2f %6.2f      %6lld %8lld\n",
        p["policy"].get<std::string>().c_str(), p["ttft_mean_s"].get<double>(),
        p["ttft_p50_s"].get<double>(), p["ttft_p90_s"].get<double>(),
        p["tbt_mean_ms"].get<double>(), p["tbt_p50_ms"].get<double>(),
        p["tbt_p90_ms"].get<double>(), static_cast<long long>(p["pairs"].get<std::int64_t>()),
        static_cast<long long>(p["decode_only"].get<std::int64_t>()));
    out << line;
  }
  for (const auto& p : result.policies) {
    if (p.reasons.empty() && p.errors.empty()) continue;
    out << "\n" << pd_policy_name(p.policy) << " reasons:";
    for (const auto& [k, v] : p.reasons) out << " " << k << "=" << v;
    for (const auto& [k, v] : p.errors) out << " error:" << k << "=" << v;
    out << " (fallbacks to decode-first: " << p.fallbacks << ")\n";
  }
  const auto ratio = [&](const char* key, const char* what, const char* target) {
    if (!j.contains(key)) return;
    std::snprintf(line, sizeof line, "  %-44s %.3f (target %s)\n", what, j[key].get<double>(),
                  target);
    out << line;
  };
  out << "\nacceptance (issue 30):\n";
  ratio("ic_over_fk_ttft_mean", "InferenceCache / full-knowledge mean TTFT", "<= 1.10");
  ratio("ic_over_df_ttft_mean", "InferenceCache / decode-first mean TTFT", "<= 0.85");
  ratio("ic_over_df_tbt_p90", "InferenceCache / decode-first p90 TBT", "<= 1.00");
  return out.str();
}

}  // namespace ic::tools::replay
