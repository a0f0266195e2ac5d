#include "gateway/picker.hh"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "gateway/endpoints.hh"
#include "service/lookup_clock.hh"
#include "sharding/index_wire.hh"

namespace ic::gateway {
namespace {

namespace pb = ::inferencecache::v1alpha1;

using Kind = index::BookingFeedback::Kind;

// What the owner core answers.
struct OwnerAnswer {
  std::vector<std::string> ranked;  // LookupRoute's replica_scores, best first
  std::vector<std::int64_t> held;   // their matched_tokens
  std::string reason_code;
  // Replicas with stats for (tenant, model) and their reported pressure.
  std::vector<std::pair<std::string, float>> known;
  index::BookingRef booking;  // of the first eligible ranked endpoint
  bool shed = false;
};

bool contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// An endpoint the answer may name: ip:port, and in the subset hint if there is
// one. Built once per step: the hint may name up to kMaxSubsetEndpoints, so
// membership is a hash lookup, not a scan of the hint per candidate.
class Eligible {
 public:
  explicit Eligible(const PickRequest& r) : subset_(r.subset.has_value()) {
    if (subset_) in_subset_.insert(r.subset->begin(), r.subset->end());
  }
  bool operator()(std::string_view id) const {
    return is_endpoint(id) && (!subset_ || in_subset_.count(id) != 0);
  }

 private:
  bool subset_;
  std::unordered_set<std::string_view> in_subset_;  // views of r.subset's strings
};

using Queued = std::unordered_map<std::string, std::int64_t>;

// The prefill work queued on each replica of the scope of `tenant` and the
// request's model, µs, before its own lookup books anything.
Queued queued_before(index::Shard& shard, std::int64_t now_wall_us, const std::string& tenant,
                     const PickRequest& r) {
  Queued queued;
  shard.queued_work(tenant, r.model_id, r.hash_scheme, now_wall_us,
                    [&queued](std::string_view id, std::int64_t us) { queued.emplace(id, us); });
  return queued;
}

// Whether every eligible endpoint the owner knows has more prefill work queued
// than the bound; false when it knows none (the stream's core may know some).
bool over_bound(const Queued& queued, const PickRequest& r, const OwnerAnswer& answer) {
  bool any = false;
  const Eligible eligible(r);
  auto idle = [&](const std::string& id) {
    if (!eligible(id)) return false;
    any = true;
    const auto q = queued.find(id);
    return q == queued.end() || q->second <= r.shed_queue_us;
  };
  if (r.subset) {
    for (const std::string& id : *r.subset)
      if (idle(id)) return false;
  } else {
    for (const std::string& id : answer.ranked)
      if (idle(id)) return false;
    for (const auto& [id, pressure] : answer.known)
      if (idle(id)) return false;
  }
  return any;
}

// Keeps booked only what is answered first (see picker.hh "Bookings").
void settle_booking(index::Shard& shard, std::int64_t now_wall_us, const PickRequest& r,
                    OwnerAnswer& answer) {
  if (!answer.booking.valid()) return;
  std::size_t first = 0;
  const Eligible eligible(r);
  while (first < answer.ranked.size() && !eligible(answer.ranked[first])) ++first;
  index::BookingFeedback f;
  f.booking = answer.booking;
  if (answer.shed || first == answer.ranked.size()) {
    f.kind = Kind::kEnded;
    shard.feedback(f, now_wall_us);
    answer.booking = index::BookingRef{};
  } else if (first > 0) {
    f.kind = Kind::kServedBy;
    f.replica_id = answer.ranked[first];
    f.held_tokens = answer.held[first];
    shard.feedback(f, now_wall_us);
  }
}

// The endpoints with stats for (tenant, model) on `shard` and their pressure,
// of every model of the tenant (each endpoint once) when none is named: at
// most kMaxCandidates, from at most kMaxReportsVisited visits, in the order
// they first reported.
std::vector<std::pair<std::string, float>> reported(const index::Shard& shard,
                                                    const std::string& tenant,
                                                    const std::string& model) {
  std::vector<std::pair<std::string, float>> known;
  // Views of the index's own names, alive while the visit runs.
  std::unordered_set<std::string_view> seen;
  const index::Shard::ReporterFn keep = [&known, &seen](std::string_view replica, float pressure) {
    if (is_endpoint(replica) && seen.insert(replica).second) known.emplace_back(replica, pressure);
    return known.size() < kMaxCandidates;
  };
  if (model.empty()) {
    shard.for_each_reporter_any_model(tenant, kMaxReportsVisited, keep);
  } else {
    shard.for_each_reporter(tenant, model, kMaxReportsVisited, keep);
  }
  return known;
}

OwnerAnswer ask_owner(index::Shard& shard, index::Clock& clock, const PickRequest& r) {
  OwnerAnswer answer;
  if (r.model_id.empty()) return answer;
  const std::int64_t now = clock.wall_us();
  const Queued queued = r.shed_queue_us > 0 ? queued_before(shard, now, r.tenant_id, r) : Queued();
  if (!r.token_ids.empty()) {
    thread_local pb::LookupRouteRequest lookup;
    thread_local pb::LookupRouteResponse response;
    lookup.Clear();
    lookup.set_tenant_id(r.tenant_id);
    lookup.set_model_id(r.model_id);
    lookup.set_hash_scheme(r.hash_scheme);
    lookup.mutable_token_ids()->Assign(r.token_ids.begin(), r.token_ids.end());
    index::LookupContext ctx;
    ctx.clock = &clock;
    ctx.deadline_mono_us = r.deadline_mono_us;
    sharding::wire::lookup_route(shard, lookup, ctx, &response);
    answer.booking = shard.last_booking();
    answer.reason_code = response.reason_code();
    for (const pb::ReplicaScore& s : response.replica_scores()) {
      answer.ranked.push_back(s.replica_id());
      answer.held.push_back(s.matched_tokens());
    }
    // A long prompt's ids are not kept for the next pick.
    if (lookup.token_ids_size() > 65536) lookup = pb::LookupRouteRequest();
  }
  answer.known = reported(shard, r.tenant_id, r.model_id);
  if (r.shed_queue_us > 0) answer.shed = over_bound(queued, r, answer);
  settle_booking(shard, clock.wall_us(), r, answer);
  return answer;
}

// One endpoint to order by load, its key computed once: fewer in flight,
// then the shorter mean time to first byte (EndpointLoad), then the lower
// reported pressure, then its place in the list it came from.
struct ByLoad {
  EndpointLoad::Rank load;
  float pressure;
  std::size_t order;
  const std::string* id;
  bool operator<(const ByLoad& o) const {
    if (load.in_flight != o.load.in_flight) return load.in_flight < o.load.in_flight;
    if (load.ttft_us != o.load.ttft_us) return load.ttft_us < o.load.ttft_us;
    if (pressure != o.pressure) return pressure < o.pressure;
    return order < o.order;
  }
};

// The candidates for the picks by load, in the order of their list: the
// subset hint, else the replicas reported, else (nothing known of the scope)
// the endpoints this core has sent requests to. At most kMaxCandidates.
std::vector<std::string> load_candidates(const PickRequest& r, const OwnerAnswer& owner) {
  std::vector<std::string> rest;
  if (r.subset) {
    rest.assign(r.subset->begin(), r.subset->begin() + std::min(r.subset->size(), kMaxCandidates));
  } else if (!owner.known.empty()) {
    for (std::size_t i = 0; i < owner.known.size() && i < kMaxCandidates; ++i)
      rest.push_back(owner.known[i].first);
  } else if (owner.ranked.empty()) {
    // No model named, or none reported by the tenant or the pool: the
    // endpoints this core has sent requests to, so a bad body still goes somewhere.
    rest = EndpointLoad::local().known();
    if (rest.size() > kMaxCandidates) rest.resize(kMaxCandidates);
  }
  return rest;
}

// Appends to `pick` the best of `rest` by load (ByLoad) that are eligible and
// not in it yet, up to max_endpoints: only that many are sorted.
void append_by_load(const PickRequest& r, const OwnerAnswer& owner,
                    const std::vector<std::string>& rest, std::size_t max_endpoints, Pick& pick) {
  if (pick.endpoints.size() >= max_endpoints || rest.empty()) return;
  std::unordered_map<std::string_view, float> pressure;
  for (std::size_t i = 0; i < owner.known.size() && i < kMaxCandidates; ++i)
    pressure.emplace(owner.known[i].first, owner.known[i].second);
  const Eligible eligible(r);
  const EndpointLoad& load = EndpointLoad::local();
  std::unordered_set<std::string_view> seen(pick.endpoints.begin(), pick.endpoints.end());
  std::vector<ByLoad> cands;
  cands.reserve(rest.size());
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::string& id = rest[i];
    if (!eligible(id) || !seen.insert(id).second) continue;
    const auto p = pressure.find(id);
    cands.push_back({load.rank(id), p != pressure.end() ? p->second : 0.f, i, &id});
  }
  const std::size_t take = std::min(cands.size(), max_endpoints - pick.endpoints.size());
  std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(take), cands.end());
  for (std::size_t i = 0; i < take; ++i) {
    pick.endpoints.push_back(*cands[i].id);
    pick.held_tokens.push_back(0);
  }
}

// The answer on the stream's core: ranked eligible endpoints, then the rest by load.
Pick compose(const PickRequest& r, const OwnerAnswer& owner, std::size_t max_endpoints) {
  Pick pick;
  pick.reason_code = owner.reason_code;
  if (owner.shed) {
    pick.reason = PickReason::kShed;
    return pick;
  }
  pick.booking = owner.booking;
  const Eligible eligible(r);
  // At most max_endpoints are answered: stop there, so the duplicate check
  // below stays that short whatever the subset hint's size.
  for (std::size_t i = 0; i < owner.ranked.size() && pick.endpoints.size() < max_endpoints; ++i) {
    const std::string& id = owner.ranked[i];
    if (eligible(id) && !contains(pick.endpoints, id)) {
      pick.endpoints.push_back(id);
      pick.held_tokens.push_back(owner.held[i]);
    }
  }
  const bool ranked = !pick.endpoints.empty();
  append_by_load(r, owner, load_candidates(r, owner), max_endpoints, pick);
  if (pick.endpoints.empty()) {
    pick.reason = PickReason::kNoEndpoint;
  } else if (ranked) {
    pick.reason =
        owner.reason_code == "PREFIX_MATCH" ? PickReason::kPrefixMatch : PickReason::kRanked;
  } else {
    pick.reason = r.failed_open ? PickReason::kFailOpen : PickReason::kLoad;
  }
  return pick;
}

// Whether the pick asks the pool tenant's owner for its endpoints: nothing
// eligible came from (tenant, model) — the owner knows no endpoint of it, or
// no model was named — and no subset hint bounds the choice.
bool wants_pool(const PickRequest& r, const OwnerAnswer& owner) {
  if (r.subset || owner.shed || r.pool_tenant.empty() ||
      (r.pool_tenant == r.tenant_id && !r.model_id.empty()))
    return false;
  const Eligible eligible(r);
  return std::none_of(owner.ranked.begin(), owner.ranked.end(), eligible) &&
         std::none_of(owner.known.begin(), owner.known.end(),
                      [&eligible](const auto& k) { return eligible(k.first); });
}

using Answered = std::pair<OwnerAnswer, PickRequest>;

// The second hop: (pool tenant, model)'s reported endpoints (of every model
// when none is named) from its owner core, then the answer. A full mailbox
// answers with what the first hop gave.
void ask_pool(sharding::ShardedIndex& index, Answered&& first, std::size_t max_endpoints,
              const std::function<void(Pick&&)>& done) {
  const unsigned owner = index.owner(first.second.pool_tenant);
  auto refused = runtime::try_submit_to(
      index.cores(), owner, std::move(first),
      [shard = &index.shard(owner), clock = &index.clock()](Answered& a) {
        const PickRequest& r = a.second;
        a.first.known = reported(*shard, r.pool_tenant, r.model_id);
        // The pool's queues bound this pick as they bound the pool tenant's own.
        if (r.shed_queue_us > 0 && !r.model_id.empty())
          a.first.shed =
              over_bound(queued_before(*shard, clock->wall_us(), r.pool_tenant, r), r, a.first);
        return std::move(a);
      },
      [done, max_endpoints](Answered&& a) { done(compose(a.second, a.first, max_endpoints)); });
  if (refused) done(compose(refused->second, refused->first, max_endpoints));
}

// The answer once the tenant's owner answered: from the pool's endpoints
// when it wants them, else as it is.
void answer(sharding::ShardedIndex& index, Answered&& owner, std::size_t max_endpoints,
            const std::function<void(Pick&&)>& done) {
  if (wants_pool(owner.second, owner.first)) {
    ask_pool(index, std::move(owner), max_endpoints, done);
  } else {
    done(compose(owner.second, owner.first, max_endpoints));
  }
}

}  // namespace

void pick(sharding::ShardedIndex& index, PickRequest&& request, std::size_t max_endpoints,
          std::function<void(Pick&&)> done) {
  if (request.model_id.empty()) {  // nothing for the tenant's owner to look up
    answer(index, Answered(OwnerAnswer{}, std::move(request)), max_endpoints, done);
    return;
  }
  runtime::Cores& cores = index.cores();
  const unsigned owner = index.owner(request.tenant_id);
  auto refused = runtime::try_submit_to(
      cores, owner, std::move(request),
      [shard = &index.shard(owner), clock = &index.clock()](PickRequest& r) {
        return std::make_pair(ask_owner(*shard, *clock, r), std::move(r));
      },
      [&index, done, max_endpoints](Answered&& owner_answer) {
        answer(index, std::move(owner_answer), max_endpoints, done);
      });
  if (refused) done(compose(*refused, OwnerAnswer{}, max_endpoints));
}

Pick pick_here(const PickRequest& request, std::size_t max_endpoints) {
  return compose(request, OwnerAnswer{}, max_endpoints);
}

void feedback(sharding::ShardedIndex& index, std::string_view tenant_id, Kind kind,
              index::BookingRef booking, std::string replica_id, std::int64_t held_tokens) {
  if (!booking.valid()) return;
  const unsigned owner = index.owner(tenant_id);
  runtime::submit(
      index.cores(), owner,
      [shard = &index.shard(owner), clock = &index.clock(), kind, booking,
       replica = std::move(replica_id), held_tokens] {
        index::BookingFeedback f;
        f.kind = kind;
        f.booking = booking;
        f.replica_id = replica;
        f.held_tokens = held_tokens;
        shard->feedback(f, clock->wall_us());
      },
      runtime::Wait{100, 1'000'000});
}

}  // namespace ic::gateway
