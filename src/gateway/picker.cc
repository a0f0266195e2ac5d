#include "gateway/picker.hh"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <utility>

#include "gateway/endpoints.hh"
#include "service/lookup_clock.hh"
#include "sharding/index_wire.hh"

namespace ic::gateway {
namespace {

namespace pb = ::inferencecache::v1alpha1;

// What the owner core answers.
struct OwnerAnswer {
  std::vector<std::string> ranked;  // LookupRoute's replica_scores, best first
  std::string reason_code;
  // Replicas with stats for (tenant, model) and their reported pressure.
  std::vector<std::pair<std::string, float>> known;
};

OwnerAnswer ask_owner(index::Shard& shard, index::Clock& clock, const PickRequest& r) {
  OwnerAnswer answer;
  if (r.model_id.empty()) return answer;
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
    answer.reason_code = response.reason_code();
    for (const pb::ReplicaScore& s : response.replica_scores())
      answer.ranked.push_back(s.replica_id());
    // A long prompt's ids are not kept for the next pick.
    if (lookup.token_ids_size() > 65536) lookup = pb::LookupRouteRequest();
  }
  pb::GetCacheStateRequest query;
  query.set_tenant_id(r.tenant_id);
  query.set_model_id(r.model_id);
  pb::GetCacheStateResponse state;
  sharding::wire::get_cache_state(shard, query, &state);
  for (const pb::ReplicaStats& s : state.replicas())
    answer.known.emplace_back(s.replica_id(), s.pressure());
  return answer;
}

bool contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// The answer on the stream's core: ranked eligible endpoints, then the rest by load.
Pick compose(const PickRequest& r, const OwnerAnswer& owner, std::size_t max_endpoints) {
  Pick pick;
  pick.reason_code = owner.reason_code;
  auto eligible = [&](std::string_view id) {
    return is_endpoint(id) && (!r.subset || contains(*r.subset, id));
  };
  for (const std::string& id : owner.ranked) {
    if (eligible(id) && !contains(pick.endpoints, id)) pick.endpoints.push_back(id);
  }
  const bool ranked = !pick.endpoints.empty();
  std::vector<std::string> rest;
  if (r.subset) {
    rest = *r.subset;
  } else {
    for (const auto& [id, pressure] : owner.known) rest.push_back(id);
    // Nothing known of (tenant, model) — no model named, or none reported —:
    // the endpoints this core has sent requests to, so a bad body still goes somewhere.
    if (rest.empty() && owner.ranked.empty()) rest = EndpointLoad::local().known();
  }
  // Lower reported pressure first, then load (stable: load decides, pressure breaks ties).
  std::unordered_map<std::string_view, float> pressure;
  for (const auto& [id, p] : owner.known) pressure.emplace(id, p);
  std::stable_sort(rest.begin(), rest.end(), [&](const std::string& a, const std::string& b) {
    const auto pa = pressure.find(a), pb_ = pressure.find(b);
    return (pa != pressure.end() ? pa->second : 0.f) < (pb_ != pressure.end() ? pb_->second : 0.f);
  });
  EndpointLoad::local().order_by_load(rest);
  for (const std::string& id : rest) {
    if (eligible(id) && !contains(pick.endpoints, id)) pick.endpoints.push_back(id);
  }
  if (pick.endpoints.size() > max_endpoints) pick.endpoints.resize(max_endpoints);
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

}  // namespace

void pick(sharding::ShardedIndex& index, PickRequest&& request, std::size_t max_endpoints,
          std::function<void(Pick&&)> done) {
  runtime::Cores& cores = index.cores();
  const unsigned owner = index.owner(request.tenant_id);
  auto refused = runtime::try_submit_to(
      cores, owner, std::move(request),
      [shard = &index.shard(owner), clock = &index.clock(), max_endpoints](PickRequest& r) {
        return std::make_pair(ask_owner(*shard, *clock, r), std::move(r));
      },
      [done, max_endpoints](std::pair<OwnerAnswer, PickRequest>&& answer) {
        done(compose(answer.second, answer.first, max_endpoints));
      });
  if (refused) done(compose(*refused, OwnerAnswer{}, max_endpoints));
}

}  // namespace ic::gateway
