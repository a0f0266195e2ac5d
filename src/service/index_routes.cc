#include "service/index_routes.hh"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpc/typed.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "metrics/registry.hh"
#include "service/inference_cache.hh"

namespace ic::service {
namespace {

namespace pb = ::inferencecache::v1alpha1;
using TimerId = CoreLink::TimerId;

std::string path(std::string_view method) {
  return "/" + std::string(kInferenceCacheService) + "/" + std::string(method);
}

pb::Ack accepted() {
  pb::Ack ack;
  ack.set_accepted(true);
  return ack;
}

grpc::Status shed(unsigned core) {
  return {grpc::StatusCode::kResourceExhausted,
          "index core " + std::to_string(core) + " is overloaded (mailbox full)"};
}

void record(std::string_view model, const pb::LookupRouteResponse& response) {
  metrics::local().record_lookup(model, response.reason_code(), response.replica_scores_size() > 0,
                                 response.lookup_latency_us());
}

// A fail-open LookupRoute answer built on the connection's core.
void answer_without_index(grpc::CallHandle& call, std::string_view model, std::string_view reason,
                          std::int64_t latency_us) {
  pb::LookupRouteResponse response;
  response.set_reason_code(std::string(reason));
  response.set_lookup_latency_us(latency_us);
  record(model, response);
  call.reply(response);
}

// ---------------------------------------------------------------- LookupRoute

struct LookupAnswer {
  grpc::CallHandle call;
  std::optional<TimerId> guard;
  std::unique_ptr<pb::LookupRouteResponse> response;
  CoreLink* link;
  void operator()() {
    if (guard) link->cancel_timer(*guard);
    call.reply(*response);
  }
};

struct LookupJob {
  IndexRouter* router;
  unsigned owner;
  unsigned back;
  pb::LookupRouteRequest request;
  index::LookupContext ctx;
  grpc::CallHandle call;
  std::optional<TimerId> guard;
  void operator()() {
    auto response = std::make_unique<pb::LookupRouteResponse>();
    router->shard(owner).lookup_route(request, ctx, response.get());
    record(request.model_id(), *response);
    router->post_reliably(back, std::make_unique<LookupAnswer>(LookupAnswer{
                                    std::move(call), guard, std::move(response), &router->link()}));
  }
};

void lookup_route(IndexRouter& router, const PromptTextConfig* prompt, grpc::CallHandle call,
                  pb::LookupRouteRequest&& request) {
  index::Clock& clock = router.clock();
  index::LookupContext ctx;
  ctx.clock = &clock;
  ctx.start_mono_us = clock.monotonic_us();
  ctx.deadline_mono_us = call.deadline_us().value_or(INT64_MAX);
  CoreLink& link = router.link();
  const unsigned here = link.current_core();
  if (!request.prompt_text().empty()) {  // tokenize here: the owner only sees token ids
    static const PromptTextConfig kNone;
    const config::CachePolicy& policy =
        router.shard(here).policies()->policy_for(request.tenant_id());
    ctx.token_ids_from_prompt =
        resolve_prompt_text(prompt != nullptr ? *prompt : kNone, policy, clock, ctx, request);
  }
  const unsigned owner = router.owner(request.tenant_id());
  if (owner == here) {  // local fast path: no hop, no allocation beyond the response
    pb::LookupRouteResponse response;
    router.shard(here).lookup_route(request, ctx, &response);
    record(request.model_id(), response);
    call.reply(response);
    return;
  }
  std::optional<TimerId> guard;
  if (ctx.deadline_mono_us != INT64_MAX) {
    const std::int64_t start = ctx.start_mono_us;
    guard = link.add_timer(std::max<std::int64_t>(0, ctx.deadline_mono_us - start),
                           [call, start, &clock, model = request.model_id()]() mutable {
                             if (!call.alive()) return;
                             answer_without_index(call, model, index::reason::kTimeout,
                                                  clock.monotonic_us() - start);
                           });
  }
  auto job = std::make_unique<LookupJob>(
      LookupJob{&router, owner, here, std::move(request), ctx, call, guard});
  const bool posted = router.try_post(owner, job);
  metrics::local().add_cross_core_post(posted);
  if (posted) return;
  if (guard) link.cancel_timer(*guard);
  answer_without_index(call, job->request.model_id(), index::reason::kNoHint,
                       clock.monotonic_us() - ctx.start_mono_us);
}

// ----------------------------------------------------------- ReportCacheState

struct IngestJob {
  IndexRouter* router;
  unsigned owner;
  std::unique_ptr<pb::CacheStateUpdate> update;
  void operator()() {
    const auto result = router->shard(owner).ingest(*update, router->clock().wall_us());
    metrics::local().add_ingest(result.entries_upserted);
    router->hand_off_cap(result.cap_handoff);
  }
};

// Shared (on the connection's core only) by the barriers of one stream.
struct AckState {
  grpc::CallHandle call;
  unsigned pending = 0;
};

struct BarrierDone {
  std::shared_ptr<AckState> state;
  void operator()() {
    if (--state->pending == 0) state->call.reply(accepted());
  }
};

struct BarrierJob {
  IndexRouter* router;
  unsigned back;
  std::shared_ptr<AckState> state;
  void operator()() {
    router->post_reliably(back, std::make_unique<BarrierDone>(BarrierDone{std::move(state)}));
  }
};

class ReportHandler final : public grpc::CallHandler {
 public:
  ReportHandler(grpc::CallHandle call, IndexRouter& router)
      : call_(std::move(call)), router_(router), used_(router.link().cores(), false) {}

  void on_message(std::span<const std::byte> message) override {
    auto update = std::make_unique<pb::CacheStateUpdate>();
    if (!grpc::parse_request(message, *update, call_)) return;
    router_.observe(*update);
    const unsigned here = router_.link().current_core();
    const unsigned owner = router_.owner(update->tenant_id());
    if (owner == here) {
      const auto result = router_.shard(here).ingest(*update, router_.clock().wall_us());
      metrics::local().add_ingest(result.entries_upserted);
      router_.hand_off_cap(result.cap_handoff);
      return;
    }
    auto job = std::make_unique<IngestJob>(IngestJob{&router_, owner, std::move(update)});
    const bool posted = router_.try_post(owner, job);
    metrics::local().add_cross_core_post(posted);
    if (!posted) {
      call_.finish(shed(owner));
      return;
    }
    used_[owner] = true;
  }

  void on_half_close() override {
    auto state = std::make_shared<AckState>();
    state->call = call_;
    const unsigned here = router_.link().current_core();
    for (unsigned core = 0; core < used_.size(); ++core) {
      if (used_[core]) ++state->pending;
    }
    if (state->pending == 0) {
      call_.reply(accepted());
      return;
    }
    // FIFO per (this core, owner) mailbox: the barrier runs after every
    // ingest this stream posted there.
    for (unsigned core = 0; core < used_.size(); ++core) {
      if (!used_[core]) continue;
      router_.post_reliably(core, std::make_unique<BarrierJob>(BarrierJob{&router_, here, state}));
    }
  }

 private:
  grpc::CallHandle call_;
  IndexRouter& router_;
  std::vector<bool> used_;  // owner cores this stream posted ingests to
};

// -------------------------------------------- PublishEvent and GetCacheState

template <typename Response>
struct Answer {
  grpc::CallHandle call;
  std::unique_ptr<Response> response;
  void operator()() { call.reply(*response); }
};

struct EventJob {
  IndexRouter* router;
  unsigned owner;
  unsigned back;
  pb::CacheEvent event;
  grpc::CallHandle call;
  void operator()() {
    router->shard(owner).apply_event(event, router->clock().wall_us());
    router->post_reliably(back, std::make_unique<Answer<pb::Ack>>(Answer<pb::Ack>{
                                    std::move(call), std::make_unique<pb::Ack>(accepted())}));
  }
};

void publish_event(IndexRouter& router, grpc::CallHandle call, pb::CacheEvent&& event) {
  router.observe(event);
  metrics::local().add_event(metrics::event_type_from_wire(event.type()));
  const unsigned here = router.link().current_core();
  const unsigned owner = router.owner(event.tenant_id());
  if (owner == here) {
    router.shard(here).apply_event(event, router.clock().wall_us());
    call.reply(accepted());
    return;
  }
  auto job = std::make_unique<EventJob>(EventJob{&router, owner, here, std::move(event), call});
  const bool posted = router.try_post(owner, job);
  metrics::local().add_cross_core_post(posted);
  if (!posted) call.finish(shed(owner));
}

struct StateJob {
  IndexRouter* router;
  unsigned owner;
  unsigned back;
  pb::GetCacheStateRequest request;
  grpc::CallHandle call;
  void operator()() {
    auto response = std::make_unique<pb::GetCacheStateResponse>();
    router->shard(owner).get_cache_state(request, response.get());
    router->post_reliably(
        back, std::make_unique<Answer<pb::GetCacheStateResponse>>(
                  Answer<pb::GetCacheStateResponse>{std::move(call), std::move(response)}));
  }
};

void get_cache_state(IndexRouter& router, grpc::CallHandle call,
                     pb::GetCacheStateRequest&& request) {
  const unsigned here = router.link().current_core();
  const unsigned owner = router.owner(request.tenant_id());
  if (owner == here) {
    pb::GetCacheStateResponse response;
    router.shard(here).get_cache_state(request, &response);
    call.reply(response);
    return;
  }
  auto job = std::make_unique<StateJob>(StateJob{&router, owner, here, std::move(request), call});
  const bool posted = router.try_post(owner, job);
  metrics::local().add_cross_core_post(posted);
  if (!posted) call.finish(shed(owner));
}

}  // namespace

void add_index_routes(grpc::MethodTable& methods, IndexRouter& router,
                      const PromptTextConfig* prompt) {
  IndexRouter* r = &router;
  methods.add(path("LookupRoute"),
              grpc::single_request_method<pb::LookupRouteRequest>(
                  grpc::CallKind::kUnary,
                  [r, prompt](grpc::CallHandle call, pb::LookupRouteRequest&& request) {
                    lookup_route(*r, prompt, std::move(call), std::move(request));
                  },
                  /*handles_deadline=*/true));
  grpc::Method report;
  report.kind = grpc::CallKind::kClientStreaming;
  report.make = [r](grpc::CallHandle call) -> std::unique_ptr<grpc::CallHandler> {
    return std::make_unique<ReportHandler>(std::move(call), *r);
  };
  methods.add(path("ReportCacheState"), std::move(report));
  methods.add(path("PublishEvent"),
              grpc::single_request_method<pb::CacheEvent>(
                  grpc::CallKind::kUnary, [r](grpc::CallHandle call, pb::CacheEvent&& event) {
                    publish_event(*r, std::move(call), std::move(event));
                  }));
  methods.add(
      path("GetCacheState"),
      grpc::single_request_method<pb::GetCacheStateRequest>(
          grpc::CallKind::kUnary, [r](grpc::CallHandle call, pb::GetCacheStateRequest&& request) {
            get_cache_state(*r, std::move(call), std::move(request));
          }));
}

}  // namespace ic::service
