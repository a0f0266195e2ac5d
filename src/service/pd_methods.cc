#include "service/pd_methods.hh"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "metrics/registry.hh"
#include "rpc/typed.hh"
#include "runtime/submit.hh"
#include "service/prompt_lookup.hh"
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
  // From now: a call whose prompt_text was tokenized first has less left.
  return timers.add_timer(std::max<std::int64_t>(0, ctx.deadline_mono_us - clock.monotonic_us()),
                          [call = std::move(call), start, &clock]() mutable {
                            if (!call.alive()) return;
                            reply_default(call, index::reason::kTimeout,
                                          clock.monotonic_us() - start);
                          });
}

// On the owner core, answered back here; guarded by the deadline when the
// owner is another core (a local one answers before any timer could).
void route(ShardedIndex& index, index::LookupContext ctx, rpc::CallHandle call,
           pb::LookupPDRouteRequest&& request) {
  index::Clock& clock = index.clock();
  ctx.clock = &clock;  // the caller's clock may live on its stack
  runtime::Cores& cores = index.cores();
  const unsigned owner = index.owner(request.tenant_id());
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
        call.reply(response);
      });
  metrics::local().add_cross_core_post(!refused);
  if (!refused) return;
  if (guard) cores.timers().cancel_timer(*guard);
  reply_default(for_shed, index::reason::kNoHint,
                std::max<std::int64_t>(0, clock.monotonic_us() - ctx.start_mono_us));
}

// LookupRoute's inputs of `pd` (fields 1–4, 6–11) moved into LookupRoute's
// message, which prompt_input.hh and PromptLookup take; back with give_back.
pb::LookupRouteRequest take_inputs(pb::LookupPDRouteRequest& pd) {
  pb::LookupRouteRequest r;
  r.mutable_model_id()->swap(*pd.mutable_model_id());
  r.mutable_tenant_id()->swap(*pd.mutable_tenant_id());
  r.mutable_prefix_hash()->swap(*pd.mutable_prefix_hash());
  r.set_prefix_token_count(pd.prefix_token_count());
  r.mutable_hash_scheme()->swap(*pd.mutable_hash_scheme());
  r.mutable_block_hashes()->Swap(pd.mutable_block_hashes());
  r.mutable_block_token_counts()->Swap(pd.mutable_block_token_counts());
  r.mutable_token_ids()->Swap(pd.mutable_token_ids());
  r.mutable_prompt_text()->swap(*pd.mutable_prompt_text());
  r.mutable_adapter_id()->swap(*pd.mutable_adapter_id());
  return r;
}

void give_back(pb::LookupRouteRequest& r, pb::LookupPDRouteRequest& pd) {
  pd.mutable_model_id()->swap(*r.mutable_model_id());
  pd.mutable_tenant_id()->swap(*r.mutable_tenant_id());
  pd.mutable_prefix_hash()->swap(*r.mutable_prefix_hash());
  pd.mutable_hash_scheme()->swap(*r.mutable_hash_scheme());
  pd.mutable_block_hashes()->Swap(r.mutable_block_hashes());
  pd.mutable_block_token_counts()->Swap(r.mutable_block_token_counts());
  pd.mutable_token_ids()->Swap(r.mutable_token_ids());
  pd.mutable_prompt_text()->swap(*r.mutable_prompt_text());
  pd.mutable_adapter_id()->swap(*r.mutable_adapter_id());
}

struct Method {
  ShardedIndex* index;
  const PromptTextConfig* prompt;  // nullptr: prompt_text fails open
  // This core's, shared with the other tokenizing surfaces; nullptr:
  // tokenize in one go.
  prompt_text::Scheduler* scheduler;
};

void lookup(const Method& m, rpc::CallHandle call, pb::LookupPDRouteRequest&& request) {
  if (request.pd_topology_ref().empty()) {  // the contract default for old clients
    reply_default(call, index::reason::kNoHint, 0);
    return;
  }
  ShardedIndex& index = *m.index;
  index::Clock& clock = index.clock();
  index::LookupContext ctx;
  ctx.clock = &clock;
  ctx.start_mono_us = clock.monotonic_us();
  ctx.deadline_mono_us = call.deadline_us().value_or(INT64_MAX);
  if (request.prompt_text().empty()) return route(index, ctx, std::move(call), std::move(request));
  // prompt_text: tokenized here as LookupRoute's (index_methods.cc lookup):
  // the owner only sees token ids.
  static const PromptTextConfig kNone;
  const PromptTextConfig& config = m.prompt != nullptr ? *m.prompt : kNone;
  const config::CachePolicy& policy =
      index.shard(index.cores().current_core()).policies()->policy_for(request.tenant_id());
  pb::LookupRouteRequest inputs = take_inputs(request);
  const PromptPlan plan = plan_prompt_text(config, policy, clock, ctx, inputs);
  if (plan.model != nullptr && m.scheduler == nullptr) {  // no scheduler: in one go
    ctx.token_ids_from_prompt = resolve_prompt_text(config, policy, clock, ctx, inputs);
  } else if (plan.model != nullptr && !m.scheduler->admits(inputs.tenant_id())) {
    metrics::local().add_prompt_text_failure(metrics::PromptTextFailure::kBusy);
  } else if (plan.model != nullptr) {
    const std::string tenant = inputs.tenant_id();
    auto rest = std::make_shared<pb::LookupPDRouteRequest>(std::move(request));
    auto then = [&index, rest](index::LookupContext& c, LookupClock&, rpc::CallHandle routed,
                               pb::LookupRouteRequest&& r) {
      give_back(r, *rest);
      route(index, c, std::move(routed), std::move(*rest));
    };
    m.scheduler->add(tenant,
                     std::make_unique<PromptLookup>(clock, config, plan, std::move(call),
                                                    std::move(inputs), ctx, -1, std::move(then)));
    return;
  }
  give_back(inputs, request);
  route(index, ctx, std::move(call), std::move(request));
}

}  // namespace

rpc::Method lookup_pd_route(ShardedIndex& index, const PromptTextConfig* prompt,
                            prompt_text::Scheduler* scheduler) {
  const Method m{&index, prompt, scheduler};
  return rpc::single_request_method<pb::LookupPDRouteRequest>(
      rpc::CallKind::kUnary,
      [m](rpc::CallHandle call, pb::LookupPDRouteRequest&& r) {
        lookup(m, std::move(call), std::move(r));
      },
      /*handles_deadline=*/true);
}

}  // namespace ic::service::pd_methods
