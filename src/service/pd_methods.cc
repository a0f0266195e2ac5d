#include "service/pd_methods.hh"

#include <algorithm>
#include <optional>
#include <string>

#include "metrics/registry.hh"
#include "rpc/typed.hh"
#include "runtime/submit.hh"
#include "sharding/pd_metrics.hh"
#include "sharding/pd_wire.hh"

namespace ic::service::pd_methods {
namespace {

namespace pb = ::inferencecache::v1alpha1;
namespace wire = sharding::wire;

using TimerId = runtime::Timers::TimerId;

// A fail-open answer built on the connection's core, counted there.
void reply_default(rpc::CallHandle& call, std::string_view reason, std::int64_t latency_us) {
  pb::LookupPDRouteResponse response;
  response.set_reason_code(std::string(reason));
  response.set_lookup_latency_us(latency_us);
  sharding::record_pd_route(reason, latency_us);
  call.reply(response);
}

// The connection-side deadline guard of a lookup on the owner core, as
// LookupRoute's: TIMEOUT when the owner's answer is late (the reply of
// whichever comes second is dropped: the call is no longer alive).
std::optional<TimerId> arm_guard(runtime::Timers& timers, index::Clock& clock,
                                 const index::LookupContext& ctx, rpc::CallHandle call) {
  if (ctx.deadline_mono_us == INT64_MAX) return std::nullopt;
  const std::int64_t start = ctx.start_mono_us;
  return timers.add_timer(std::max<std::int64_t>(0, ctx.deadline_mono_us - start),
                          [call = std::move(call), start, &clock]() mutable {
                            if (!call.alive()) return;
                            reply_default(call, index::reason::kTimeout,
                                          clock.monotonic_us() - start);
                          });
}

void lookup(ShardedIndex& index, rpc::CallHandle call, pb::LookupPDRouteRequest&& request) {
  if (request.pd_topology_ref().empty()) {  // the contract default for old clients
    reply_default(call, index::reason::kNoHint, 0);
    return;
  }
  index::Clock& clock = index.clock();
  index::LookupContext ctx;
  ctx.clock = &clock;
  ctx.start_mono_us = clock.monotonic_us();
  ctx.deadline_mono_us = call.deadline_us().value_or(INT64_MAX);
  runtime::Cores& cores = index.cores();
  const unsigned owner = index.owner(request.tenant_id());
  // The owner may be this core: its answer comes before any timer could.
  std::optional<TimerId> guard =
      owner != cores.current_core() ? arm_guard(cores.timers(), clock, ctx, call) : std::nullopt;
  rpc::CallHandle for_shed = call;  // the reply takes `call` along
  auto refused = runtime::try_submit_to(
      cores, owner, std::move(request),
      [shard = &index.shard(owner), ctx](pb::LookupPDRouteRequest& r) {
        pb::LookupPDRouteResponse response;
        wire::lookup_pd_route(*shard, r, ctx, &response);
        // The metrics of the core doing the work.
        sharding::record_pd_route(response.reason_code(), response.lookup_latency_us());
        return response;
      },
      [call = std::move(call), guard, &cores](pb::LookupPDRouteResponse&& response) mutable {
        if (guard) cores.timers().cancel_timer(*guard);
        if (call.alive()) call.reply(response);
      });
  metrics::local().add_cross_core_post(!refused);
  if (!refused) return;
  if (guard) cores.timers().cancel_timer(*guard);
  reply_default(for_shed, index::reason::kNoHint,
                std::max<std::int64_t>(0, clock.monotonic_us() - ctx.start_mono_us));
}

}  // namespace

rpc::Method lookup_pd_route(ShardedIndex& index) {
  return rpc::single_request_method<pb::LookupPDRouteRequest>(
      rpc::CallKind::kUnary,
      [i = &index](rpc::CallHandle call, pb::LookupPDRouteRequest&& r) {
        lookup(*i, std::move(call), std::move(r));
      },
      /*handles_deadline=*/true);
}

}  // namespace ic::service::pd_methods
