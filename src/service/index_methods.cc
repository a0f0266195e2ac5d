#include "service/index_methods.hh"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metrics/registry.hh"
#include "prompt_text/scheduler.hh"
#include "rpc/typed.hh"
#include "runtime/runtime.hh"
#include "runtime/submit.hh"
#include "service/lookup_clock.hh"
#include "service/prompt_lookup.hh"
#include "sharding/index_wire.hh"

namespace ic::service::index_methods {
namespace {

namespace pb = ::inferencecache::v1alpha1;
namespace wire = sharding::wire;
using sharding::Placement;

using TimerId = runtime::Timers::TimerId;

pb::Ack accepted() {
  pb::Ack ack;
  ack.set_accepted(true);
  return ack;
}

rpc::Status shed(unsigned core) {
  return {rpc::StatusCode::kResourceExhausted,
          "index core " + std::to_string(core) + " is overloaded (mailbox full)"};
}

void record(std::string_view model, const pb::LookupRouteResponse& response) {
  metrics::local().record_lookup(model, response.reason_code(), response.replica_scores_size() > 0,
                                 response.lookup_latency_us());
}

// A fail-open LookupRoute answer built on the connection's core.
void answer_without_index(rpc::CallHandle& call, std::string_view model, std::string_view reason,
                          std::int64_t latency_us) {
  pb::LookupRouteResponse response;
  response.set_reason_code(std::string(reason));
  response.set_lookup_latency_us(latency_us);
  record(model, response);
  call.reply(response);
}

// ---------------------------------------------------------------- LookupRoute

// Arms the connection-side deadline guard of a remote lookup: TIMEOUT if the
// owner's answer is late (a local lookup answers before any timer could).
std::optional<TimerId> arm_guard(runtime::Timers& timers, index::Clock& clock,
                                 const index::LookupContext& ctx, rpc::CallHandle call,
                                 const std::string& model) {
  if (ctx.deadline_mono_us == INT64_MAX) return std::nullopt;
  const std::int64_t start = ctx.start_mono_us;
  return timers.add_timer(std::max<std::int64_t>(0, ctx.deadline_mono_us - start),
                          [call = std::move(call), start, &clock, model]() mutable {
                            if (!call.alive()) return;
                            answer_without_index(call, model, index::reason::kTimeout,
                                                 clock.monotonic_us() - start);
                          });
}

// Where a LookupRoute call takes its wall time from (service/lookup_clock.hh).
struct LookupTimes {
  // The reactors whose turn readings give a call's wall time: set when the
  // index clock is the system clock the reactors read too (a server), nullptr
  // otherwise (tests drive a ManualClock: the index reads it as before).
  runtime::Runtime* reactors = nullptr;

  // Step 0 on core `here`: the call's start (one monotonic read), its
  // deadline, and the clock the index reads (`ctx.clock`, set by the caller
  // to the returned LookupClock, which lives on the caller's stack).
  LookupClock begin(index::Clock& clock, unsigned here, const rpc::CallHandle& call,
                    index::LookupContext& ctx) const {
    ctx.start_mono_us = clock.monotonic_us();
    ctx.deadline_mono_us = call.deadline_us().value_or(INT64_MAX);
    if (reactors == nullptr) return LookupClock(clock, -1);
    const runtime::Reactor& r = reactors->reactor(here);
    return LookupClock(clock, wall_at(ctx.start_mono_us, r.now_us(), r.wall_us()));
  }
};

// This core answers the tenant (its owner, or a spread tenant's read copy):
// look up and answer now, into this core's reusable response message
// (to_response clears it; Clear keeps the replica score elements and their
// strings for the next call). `Request` is the message or its views
// (sharding/lookup_request_view.hh).
template <typename Request>
void answer_here(index::Shard& shard, const index::LookupContext& ctx, rpc::CallHandle& call,
                 const Request& request, std::string_view model_id) {
  // Token ids echoed for prompt_text are the one field that grows with the
  // request: a large echo is not kept.
  constexpr int kMaxKeptTokenIds = 4096;
  thread_local pb::LookupRouteResponse response;
  wire::lookup_route(shard, request, ctx, &response);
  record(model_id, response);
  call.reply(response);
  if (response.token_ids_size() > kMaxKeptTokenIds) response = pb::LookupRouteResponse();
}

// The shard on core `here` that answers `tenant_id`'s lookups: the tenant's
// own when this core owns it, a spread tenant's live read copy
// (docs/placement.md), else nullptr (the owner answers, one hop away).
index::Shard* answering_shard(ShardedIndex& index, unsigned here, std::string_view tenant_id) {
  if (index.owner(tenant_id) == here) return &index.shard(here);
  Placement* placement = index.placement();
  return placement != nullptr ? placement->copy_for(here, tenant_id) : nullptr;
}

// A request decoded as views, for a tenant `shard` (on this core) answers.
void lookup_here(ShardedIndex& index, index::Shard& shard, LookupTimes times, rpc::CallHandle& call,
                 const wire::LookupRequestView& request) {
  index::Clock& clock = index.clock();
  const unsigned here = index.cores().current_core();
  index::LookupContext ctx;
  LookupClock call_clock = times.begin(clock, here, call, ctx);
  ctx.clock = &call_clock;
  answer_here(shard, ctx, call, request, request.model_id);
}

// Answers a lookup whose input is final (prompt_text resolved or left):
// here when this core answers the tenant, else on its owner core, guarded
// by the deadline. `ctx.clock` is `call_clock`.
void route_lookup(ShardedIndex& index, index::LookupContext& ctx, LookupClock& call_clock,
                  rpc::CallHandle call, pb::LookupRouteRequest&& request) {
  index::Clock& clock = index.clock();
  runtime::Cores& cores = index.cores();
  const unsigned here = cores.current_core();
  if (index::Shard* shard = answering_shard(index, here, request.tenant_id()); shard != nullptr) {
    answer_here(*shard, ctx, call, request, request.model_id());
    return;
  }
  const unsigned owner = index.owner(request.tenant_id());
  ctx.clock = &clock;  // call_clock stays on this stack; the owner makes its own
  const std::int64_t wall = call_clock.given_wall_us();
  std::optional<TimerId> guard = arm_guard(cores.timers(), clock, ctx, call, request.model_id());
  rpc::CallHandle for_shed = call;  // the reply takes `call` along
  // The runtime's verb straight to the owner's shard: there, and the answer
  // back here (runtime/submit.hh).
  auto refused = runtime::try_submit_to(
      cores, owner, std::move(request),
      [shard = &index.shard(owner), ctx, wall](pb::LookupRouteRequest& r) {
        LookupClock owner_clock(*ctx.clock, wall);
        index::LookupContext owner_ctx = ctx;
        owner_ctx.clock = &owner_clock;
        pb::LookupRouteResponse response;
        wire::lookup_route(*shard, r, owner_ctx, &response);
        record(r.model_id(), response);  // the metrics of the core doing the work
        return response;
      },
      [call = std::move(call), guard, &cores](pb::LookupRouteResponse&& response) mutable {
        if (guard) cores.timers().cancel_timer(*guard);
        call.reply(response);
      });
  metrics::local().add_cross_core_post(!refused);
  if (!refused) return;
  if (guard) cores.timers().cancel_timer(*guard);
  answer_without_index(for_shed, refused->model_id(), index::reason::kNoHint,
                       clock.monotonic_us() - ctx.start_mono_us);
}

// `invalid_prompt_text`: the request's prompt_text was not UTF-8 and was
// removed before parsing (drop_invalid_prompt_text): it fails open.
void lookup(ShardedIndex& index, const PromptTextConfig* prompt, prompt_text::Scheduler* scheduler,
            LookupTimes times, rpc::CallHandle call, pb::LookupRouteRequest&& request,
            bool invalid_prompt_text) {
  index::Clock& clock = index.clock();
  const unsigned here = index.cores().current_core();
  index::LookupContext ctx;
  LookupClock call_clock = times.begin(clock, here, call, ctx);
  ctx.clock = &call_clock;
  static const PromptTextConfig kNone;
  const PromptTextConfig& config = prompt != nullptr ? *prompt : kNone;
  if (invalid_prompt_text) {
    count_invalid_prompt_text(config, index.shard(here).policies()->policy_for(request.tenant_id()),
                              request);
  } else if (!request.prompt_text().empty()) {  // tokenize here: the owner only sees token ids
    const config::CachePolicy& policy =
        index.shard(here).policies()->policy_for(request.tenant_id());
    const PromptPlan plan = plan_prompt_text(config, policy, clock, ctx, request);
    if (plan.model != nullptr && scheduler == nullptr) {  // no scheduler: in one go
      ctx.token_ids_from_prompt = resolve_prompt_text(config, policy, clock, ctx, request);
    } else if (plan.model != nullptr && !scheduler->admits(request.tenant_id())) {
      metrics::local().add_prompt_text_failure(metrics::PromptTextFailure::kBusy);
    } else if (plan.model != nullptr) {
      const std::string tenant = request.tenant_id();
      auto route = [&index](index::LookupContext& c, LookupClock& clock, rpc::CallHandle call,
                            pb::LookupRouteRequest&& r) {
        route_lookup(index, c, clock, std::move(call), std::move(r));
      };
      scheduler->add(tenant, std::make_unique<PromptLookup>(
                                 index.clock(), config, plan, std::move(call), std::move(request),
                                 ctx, call_clock.given_wall_us(), std::move(route)));
      return;
    }
  }
  route_lookup(index, ctx, call_clock, std::move(call), std::move(request));
}

// A LookupRoute request's bytes and their views, pooled per core
// (rpc/message_pool.hh): a warm core allocates nothing for them.
struct HeldLookup {
  std::string bytes;
  wire::LookupRequestView view;
  // The views are left for the next decode, which clears them first.
  void Clear() { bytes.clear(); }
};

// LookupRoute's handler: rpc::SingleRequestHandler's contract (one message,
// then half-close; the same errors) with a fast path. The message is kept as
// bytes and decoded into views (sharding/lookup_request_view.hh); at
// half-close a tenant this core owns is looked up from the views, with no
// protobuf message filled. A request the views do not take, or for a tenant
// owned elsewhere, is parsed into a pooled message and goes through lookup().
class LookupHandler final : public rpc::CallHandler {
 public:
  LookupHandler(rpc::CallHandle call, ShardedIndex& index, const PromptTextConfig* prompt,
                prompt_text::Scheduler* scheduler, LookupTimes times)
      : call_(std::move(call)),
        index_(index),
        prompt_(prompt),
        scheduler_(scheduler),
        times_(times) {}
  ~LookupHandler() override {
    if (held_.message) rpc::message_pool<HeldLookup>().give(std::move(held_), wire_bytes_);
    if (request_.message)
      rpc::message_pool<pb::LookupRouteRequest>().give(std::move(request_), wire_bytes_);
  }
  LookupHandler(const LookupHandler&) = delete;
  LookupHandler& operator=(const LookupHandler&) = delete;

  void on_message(std::span<const std::byte> message) override {
    if (have_) {
      call_.finish(rpc::extra_unary_message());
      return;
    }
    wire_bytes_ = message.size();
    held_ = rpc::message_pool<HeldLookup>().take();
    held_.message->bytes.assign(reinterpret_cast<const char*>(message.data()), message.size());
    have_ = wire::decode(held_.message->bytes, held_.message->view) || parse(message);
  }

  void on_half_close() override {
    if (!have_) {
      call_.finish(rpc::missing_unary_message());
      return;
    }
    if (request_.message == nullptr) {
      if (index::Shard* shard =
              answering_shard(index_, index_.cores().current_core(), held_.message->view.tenant_id);
          shard != nullptr) {
        lookup_here(index_, *shard, times_, call_, held_.message->view);
        return;
      }
      parse(std::as_bytes(std::span(held_.message->bytes.data(), held_.message->bytes.size())));
    }
    lookup(index_, prompt_, scheduler_, times_, std::move(call_), std::move(*request_.message),
           invalid_prompt_text_);
  }

 private:
  // The protobuf path (failure: INVALID_ARGUMENT, as every method answers),
  // except a prompt_text that is not UTF-8: removed, and the lookup fails
  // open without it (docs/prompt-text.md "Failure modes"). `message` holds
  // the bytes of held_.
  bool parse(std::span<const std::byte> message) {
    request_ = rpc::message_pool<pb::LookupRouteRequest>().take();
    if (request_.message->ParseFromArray(message.data(), static_cast<int>(message.size())))
      return true;
    std::string& bytes = held_.message->bytes;
    if (drop_invalid_prompt_text(bytes)) {
      invalid_prompt_text_ = true;
      message = std::as_bytes(std::span(bytes.data(), bytes.size()));
    }
    return rpc::parse_request(message, *request_.message, call_);
  }

  rpc::CallHandle call_;
  ShardedIndex& index_;
  const PromptTextConfig* prompt_;
  prompt_text::Scheduler*
      scheduler_;  // this core's (outlives the handler); nullptr: tokenize in one go
  LookupTimes times_;
  rpc::MessagePool<HeldLookup>::Lease held_;
  rpc::MessagePool<pb::LookupRouteRequest>::Lease request_;  // protobuf path only
  std::size_t wire_bytes_ = 0;  // of the message: decides whether its storage is pooled
  bool have_ = false;
  bool invalid_prompt_text_ = false;  // removed by parse(): fails open
};

// ----------------------------------------------------------- ReportCacheState

class ReportHandler final : public rpc::CallHandler {
 public:
  ReportHandler(rpc::CallHandle call, ShardedIndex& index)
      : call_(std::move(call)), index_(index), used_(index.cores().cores(), false) {}

  void on_message(std::span<const std::byte> message) override {
    pb::CacheStateUpdate update;
    if (!rpc::parse_request(message, update, call_)) return;
    const std::uint64_t sequence = index_.observe(update);
    const unsigned owner = index_.owner(update.tenant_id());
    const bool remote = owner != index_.cores().current_core();
    const bool refused = index_.ingest(owner, std::move(update), sequence).has_value();
    if (!remote) return;
    metrics::local().add_cross_core_post(!refused);
    if (refused) {
      call_.finish(shed(owner));
      return;
    }
    used_[owner] = true;
  }

  // FIFO per (this core, owner) mailbox: each barrier comes back after every
  // ingest this stream sent there; the Ack follows the last one.
  void on_half_close() override {
    auto pending = std::make_shared<unsigned>(0);
    for (const bool used : used_) *pending += used ? 1 : 0;
    if (*pending == 0) {
      call_.reply(accepted());
      return;
    }
    for (unsigned core = 0; core < used_.size(); ++core) {
      if (!used_[core]) continue;
      index_.barrier(core, [call = call_, pending]() mutable {
        if (--*pending == 0) call.reply(accepted());
      });
    }
  }

 private:
  rpc::CallHandle call_;
  ShardedIndex& index_;
  std::vector<bool> used_;  // owner cores this stream sent ingests to
};

// -------------------------------------------- PublishEvent and GetCacheState

// The shed answer and the hop's metric of a call to the tenant's owner.
template <typename Request>
void finish_routed(ShardedIndex& index, rpc::CallHandle& call, unsigned owner,
                   const std::optional<Request>& refused) {
  if (owner == index.cores().current_core()) return;
  metrics::local().add_cross_core_post(!refused);
  if (refused) call.finish(shed(owner));
}

void publish(ShardedIndex& index, rpc::CallHandle call, pb::CacheEvent&& event) {
  const std::uint64_t sequence = index.observe(event);
  metrics::local().add_event(event.type());
  const unsigned owner = index.owner(event.tenant_id());
  auto refused = index.apply_event(
      owner, std::move(event), [call]() mutable { call.reply(accepted()); }, sequence);
  finish_routed(index, call, owner, refused);
}

void cache_state(ShardedIndex& index, rpc::CallHandle call, pb::GetCacheStateRequest&& request) {
  const unsigned owner = index.owner(request.tenant_id());
  auto refused = index.get_cache_state(
      owner, std::move(request),
      [call](pb::GetCacheStateResponse&& response) mutable { call.reply(response); });
  finish_routed(index, call, owner, refused);
}

}  // namespace

rpc::Method lookup_route(ShardedIndex& index, const PromptTextConfig* prompt,
                         prompt_text::Scheduler* scheduler) {
  ShardedIndex* i = &index;
  LookupTimes times;
  if (dynamic_cast<index::SystemClock*>(&index.clock()) != nullptr)
    times.reactors = dynamic_cast<runtime::Runtime*>(&index.cores());
  rpc::Method m;
  m.kind = rpc::CallKind::kUnary;
  m.handles_deadline = true;
  m.make = [i, prompt, times,
            scheduler](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<LookupHandler>(std::move(call), *i, prompt, scheduler, times);
  };
  return m;
}

rpc::Method report_cache_state(ShardedIndex& index) {
  rpc::Method report;
  report.kind = rpc::CallKind::kClientStreaming;
  report.make = [i = &index](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<ReportHandler>(std::move(call), *i);
  };
  return report;
}

rpc::Method publish_event(ShardedIndex& index) {
  return rpc::single_request_method<pb::CacheEvent>(
      rpc::CallKind::kUnary, [i = &index](rpc::CallHandle call, pb::CacheEvent&& event) {
        publish(*i, std::move(call), std::move(event));
      });
}

rpc::Method get_cache_state(ShardedIndex& index) {
  return rpc::single_request_method<pb::GetCacheStateRequest>(
      rpc::CallKind::kUnary,
      [i = &index](rpc::CallHandle call, pb::GetCacheStateRequest&& request) {
        cache_state(*i, std::move(call), std::move(request));
      });
}

}  // namespace ic::service::index_methods
