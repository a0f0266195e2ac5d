#include "service/pd_methods.hh"

#include <algorithm>
#include <string>

#include "metrics/registry.hh"
#include "rpc/typed.hh"
#include "runtime/submit.hh"
#include "sharding/pd_wire.hh"

namespace ic::service::pd_methods {
namespace {

namespace pb = ::inferencecache::v1alpha1;
namespace wire = sharding::wire;

void reply_default(rpc::CallHandle& call, std::string_view reason, std::int64_t latency_us) {
  pb::LookupPDRouteResponse response;
  response.set_reason_code(std::string(reason));
  response.set_lookup_latency_us(latency_us);
  call.reply(response);
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
  rpc::CallHandle for_shed = call;  // the reply takes `call` along
  auto refused = runtime::try_submit_to(
      cores, owner, std::move(request),
      [shard = &index.shard(owner), ctx](pb::LookupPDRouteRequest& r) {
        pb::LookupPDRouteResponse response;
        wire::lookup_pd_route(*shard, r, ctx, &response);
        return response;
      },
      [call = std::move(call)](pb::LookupPDRouteResponse&& response) mutable {
        call.reply(response);
      });
  metrics::local().add_cross_core_post(!refused);
  if (refused) {
    reply_default(for_shed, index::reason::kNoHint,
                  std::max<std::int64_t>(0, clock.monotonic_us() - ctx.start_mono_us));
  }
}

}  // namespace

rpc::Method lookup_pd_route(ShardedIndex& index) {
  return rpc::single_request_method<pb::LookupPDRouteRequest>(
      rpc::CallKind::kUnary, [i = &index](rpc::CallHandle call, pb::LookupPDRouteRequest&& r) {
        lookup(*i, std::move(call), std::move(r));
      });
}

}  // namespace ic::service::pd_methods
